public import NIOCore

/// Reads what a NATS server sends, one operation at a time, from a stream of bytes that may end anywhere: a
/// `ByteToMessageDecoder` for the client's channel, and a plain function for tests.
///
/// Operation names are read without regard to case, fields are separated by spaces or tabs, and a line ends with
/// CRLF, as the protocol says. A control line longer than `maxControlLine` (the server's default is 4 KiB) or a
/// message larger than `maxPayload` is malformed: a client must not buffer without bound whatever the other side
/// sends.
public struct NATSServerDecoder: ByteToMessageDecoder, Sendable {
    public typealias InboundOut = NATSServerOperation

    /// What the server sent that is not the protocol.
    public struct Malformed: Error, Sendable, CustomStringConvertible {
        public let description: String
    }

    public let maxControlLine: Int
    public let maxPayload: Int

    public init(maxControlLine: Int = 4096, maxPayload: Int = 64 << 20) {
        self.maxControlLine = maxControlLine
        self.maxPayload = maxPayload
    }

    public mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard let operation = try decode(buffer: &buffer) else { return .needMoreData }
        context.fireChannelRead(wrapInboundOut(operation))
        return .continue
    }

    /// The next whole operation in `buffer`, consumed; nil when more bytes are needed.
    ///
    /// Read at the byte level: a subscriber of many messages pays for no `String` but the subject's and the sid's
    /// (both usually short enough to be stored inline) and no copy of the headers or the payload.
    public func decode(buffer: inout ByteBuffer) throws -> NATSServerOperation? {
        var noSubject: String?
        return try decode(buffer: &buffer, reusing: &noSubject)
    }

    /// ``decode(buffer:)``, the subject made only when it differs from `lastSubject` (which it then becomes): a
    /// subscriber of many messages sees the same few subjects again and again, and one `String` made per message
    /// (a heap allocation past 15 bytes) was a tenth of what taking one in cost.
    func decode(buffer: inout ByteBuffer, reusing lastSubject: inout String?) throws -> NATSServerOperation? {
        let parsed: (line: ControlLine, lineLength: Int)? = try buffer.withUnsafeReadableBytes { bytes in
            guard let newline = bytes.firstIndex(of: UInt8(ascii: "\n")) else {
                if bytes.count > maxControlLine + 2 { throw Malformed(description: "a control line of more than \(maxControlLine) bytes") }
                return nil
            }
            let lineLength = newline + 1
            guard lineLength <= maxControlLine + 2 else { throw Malformed(description: "a control line of more than \(maxControlLine) bytes") }
            guard lineLength >= 2, bytes[newline - 1] == UInt8(ascii: "\r") else { throw Malformed(description: "a line not ended by CRLF") }
            return (try ControlLine(UnsafeRawBufferPointer(rebasing: bytes[0..<(newline - 1)]), reusing: &lastSubject), lineLength)
        }
        guard let (line, lineLength) = parsed else { return nil }
        switch line.kind {
        case .ping:
            buffer.moveReaderIndex(forwardBy: lineLength)
            return .ping
        case .pong:
            buffer.moveReaderIndex(forwardBy: lineLength)
            return .pong
        case .ok:
            buffer.moveReaderIndex(forwardBy: lineLength)
            return .ok
        case .error(let text):
            buffer.moveReaderIndex(forwardBy: lineLength)
            return .error(text.count >= 2 && text.hasPrefix("'") && text.hasSuffix("'") ? String(text.dropFirst().dropLast()) : text)
        case .info(let json):
            buffer.moveReaderIndex(forwardBy: lineLength)
            return .info(json)
        case .message(let subject, let sid, let replyTo, let headerSize, let totalSize):
            guard totalSize <= maxPayload else { throw Malformed(description: "a message of \(totalSize) bytes, over \(maxPayload)") }
            guard buffer.readableBytes >= lineLength + totalSize + 2 else { return nil }
            let bodyStart = buffer.readerIndex + lineLength
            guard buffer.getInteger(at: bodyStart + totalSize, as: UInt16.self) == UInt16(0x0D0A) else {
                throw Malformed(description: "a message body not followed by CRLF")
            }
            var headers: NATSHeaders?
            if let headerSize {
                guard let parsed = NATSHeaders(parsing: buffer.getSlice(at: bodyStart, length: headerSize)!) else {
                    throw Malformed(description: "headers that do not start with NATS/1.0")
                }
                headers = parsed
            }
            let payloadStart = bodyStart + (headerSize ?? 0)
            let payload = buffer.getSlice(at: payloadStart, length: totalSize - (headerSize ?? 0))!
            buffer.moveReaderIndex(forwardBy: lineLength + totalSize + 2)
            return .message(NATSMessage(subject: subject, sid: sid, replyTo: replyTo, headers: headers, payload: payload))
        }
    }

    /// A control line, its fields read.
    private struct ControlLine {
        enum Kind {
            case ping, pong, ok
            case error(String)
            case info(String)
            /// `MSG <subject> <sid> [reply-to] <#bytes>` (no header size) or
            /// `HMSG <subject> <sid> [reply-to] <#header bytes> <#total bytes>`.
            case message(subject: String, sid: String, replyTo: String?, headerSize: Int?, totalSize: Int)
        }

        let kind: Kind

        init(_ line: UnsafeRawBufferPointer, reusing lastSubject: inout String?) throws {
            var fields = Fields()
            var index = 0
            while index < line.count, fields.count < Fields.capacity {
                while index < line.count, line[index] == UInt8(ascii: " ") || line[index] == UInt8(ascii: "\t") { index += 1 }
                let start = index
                while index < line.count, line[index] != UInt8(ascii: " "), line[index] != UInt8(ascii: "\t") { index += 1 }
                if index > start { fields.append(start..<index) }
            }
            func text(_ range: Range<Int>) -> String { String(decoding: UnsafeRawBufferPointer(rebasing: line[range]), as: UTF8.self) }
            func subject(_ range: Range<Int>) -> String {
                let bytes = UnsafeRawBufferPointer(rebasing: line[range])
                if var last = lastSubject, last.withUTF8({ $0.elementsEqual(bytes) }) { return last }
                let made = String(decoding: bytes, as: UTF8.self)
                lastSubject = made
                return made
            }
            func rest(after field: Range<Int>) -> String {
                var start = field.upperBound
                while start < line.count, line[start] == UInt8(ascii: " ") || line[start] == UInt8(ascii: "\t") { start += 1 }
                return text(start..<line.count)
            }
            func number(_ range: Range<Int>) -> Int? {
                guard !range.isEmpty, range.count <= 18 else { return nil }
                var value = 0
                for index in range {
                    let digit = Int(line[index]) - 48
                    guard (0...9).contains(digit) else { return nil }
                    value = value * 10 + digit
                }
                return value
            }
            func isName(_ range: Range<Int>, _ name: StaticString) -> Bool {
                guard range.count == name.utf8CodeUnitCount else { return false }
                return zip(range, UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount)).allSatisfy { line[$0] | 0x20 == $1 | 0x20 }
            }
            guard fields.count > 0 else { throw Malformed(description: "an empty line") }
            let name = fields[0]
            let quoted = { String(text(0..<line.count).prefix(64)) }
            if isName(name, "MSG") {
                guard fields.count == 4 || fields.count == 5, let size = number(fields.last) else {
                    throw Malformed(description: "a MSG line with bad fields: \(quoted())")
                }
                kind = .message(subject: subject(fields[1]), sid: text(fields[2]), replyTo: fields.count == 5 ? text(fields[3]) : nil, headerSize: nil, totalSize: size)
            } else if isName(name, "HMSG") {
                guard fields.count == 5 || fields.count == 6, let headerSize = number(fields[fields.count - 2]),
                    let total = number(fields.last), total >= headerSize
                else {
                    throw Malformed(description: "an HMSG line with bad fields: \(quoted())")
                }
                kind = .message(
                    subject: subject(fields[1]),
                    sid: text(fields[2]),
                    replyTo: fields.count == 6 ? text(fields[3]) : nil,
                    headerSize: headerSize,
                    totalSize: total
                )
            } else if isName(name, "PING") {
                kind = .ping
            } else if isName(name, "PONG") {
                kind = .pong
            } else if isName(name, "+OK") {
                kind = .ok
            } else if isName(name, "-ERR") {
                kind = .error(rest(after: name))
            } else if isName(name, "INFO") {
                kind = .info(rest(after: name))
            } else {
                throw Malformed(description: "an unknown operation: \(String(text(name).prefix(32)))")
            }
        }

        /// The fields of a line, at most six (`HMSG`'s), kept inline: no array made per message.
        struct Fields {
            static let capacity = 6
            private var storage: (Range<Int>, Range<Int>, Range<Int>, Range<Int>, Range<Int>, Range<Int>) = (0..<0, 0..<0, 0..<0, 0..<0, 0..<0, 0..<0)
            private(set) var count = 0

            mutating func append(_ range: Range<Int>) {
                withUnsafeMutableBytes(of: &storage) { $0.storeBytes(of: range, toByteOffset: count * MemoryLayout<Range<Int>>.stride, as: Range<Int>.self) }
                count += 1
            }

            subscript(index: Int) -> Range<Int> {
                precondition(index < count)
                return withUnsafeBytes(of: storage) { $0.load(fromByteOffset: index * MemoryLayout<Range<Int>>.stride, as: Range<Int>.self) }
            }

            var last: Range<Int> { self[count - 1] }
        }
    }
}
