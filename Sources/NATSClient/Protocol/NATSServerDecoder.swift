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
    public func decode(buffer: inout ByteBuffer) throws -> NATSServerOperation? {
        let view = buffer.readableBytesView
        guard let newline = view.firstIndex(of: UInt8(ascii: "\n")) else {
            if view.count > maxControlLine { throw Malformed(description: "a control line of more than \(maxControlLine) bytes") }
            return nil
        }
        let lineLength = newline - view.startIndex + 1
        guard lineLength <= maxControlLine + 2 else { throw Malformed(description: "a control line of more than \(maxControlLine) bytes") }
        guard lineLength >= 2, view[newline - 1] == UInt8(ascii: "\r") else { throw Malformed(description: "a line not ended by CRLF") }
        let line = buffer.getString(at: buffer.readerIndex, length: lineLength - 2) ?? ""
        let (name, arguments) = Self.split(line)
        switch name.uppercased() {
        case "PING":
            buffer.moveReaderIndex(forwardBy: lineLength)
            return .ping
        case "PONG":
            buffer.moveReaderIndex(forwardBy: lineLength)
            return .pong
        case "+OK":
            buffer.moveReaderIndex(forwardBy: lineLength)
            return .ok
        case "-ERR":
            buffer.moveReaderIndex(forwardBy: lineLength)
            let text = arguments.joined(separator: " ")
            return .error(text.count >= 2 && text.hasPrefix("'") && text.hasSuffix("'") ? String(text.dropFirst().dropLast()) : text)
        case "INFO":
            buffer.moveReaderIndex(forwardBy: lineLength)
            return .info(String(line.drop { $0 != " " && $0 != "\t" }.drop { $0 == " " || $0 == "\t" }))
        case "MSG":
            // MSG <subject> <sid> [reply-to] <#bytes>
            guard arguments.count == 3 || arguments.count == 4, let size = Int(arguments.last!), size >= 0 else {
                throw Malformed(description: "a MSG line with bad fields: \(line)")
            }
            return try body(of: buffer.readerIndex, lineLength: lineLength, headerSize: 0, totalSize: size, in: &buffer) { payload, _ in
                .message(NATSMessage(
                    subject: arguments[0],
                    sid: arguments[1],
                    replyTo: arguments.count == 4 ? arguments[2] : nil,
                    payload: payload
                ))
            }
        case "HMSG":
            // HMSG <subject> <sid> [reply-to] <#header bytes> <#total bytes>
            guard arguments.count == 4 || arguments.count == 5, let headerSize = Int(arguments[arguments.count - 2]),
                let total = Int(arguments.last!), headerSize >= 0, total >= headerSize
            else {
                throw Malformed(description: "an HMSG line with bad fields: \(line)")
            }
            return try body(of: buffer.readerIndex, lineLength: lineLength, headerSize: headerSize, totalSize: total, in: &buffer) { payload, headerText in
                guard let headers = NATSHeaders(parsing: headerText[...]) else {
                    throw Malformed(description: "headers that do not start with NATS/1.0")
                }
                return .message(NATSMessage(
                    subject: arguments[0],
                    sid: arguments[1],
                    replyTo: arguments.count == 5 ? arguments[2] : nil,
                    headers: headers,
                    payload: payload
                ))
            }
        default:
            throw Malformed(description: "an unknown operation: \(name.prefix(32))")
        }
    }

    /// The operation whose body (headers, then payload, then CRLF) follows the control line, once it is all there.
    private func body(
        of start: Int,
        lineLength: Int,
        headerSize: Int,
        totalSize: Int,
        in buffer: inout ByteBuffer,
        _ make: (ByteBuffer, String) throws -> NATSServerOperation
    ) throws -> NATSServerOperation? {
        guard totalSize <= maxPayload else { throw Malformed(description: "a message of \(totalSize) bytes, over \(maxPayload)") }
        guard buffer.readableBytes >= lineLength + totalSize + 2 else { return nil }
        let bodyStart = start + lineLength
        guard buffer.getInteger(at: bodyStart + totalSize, as: UInt16.self) == UInt16(0x0D0A) else {
            throw Malformed(description: "a message body not followed by CRLF")
        }
        let headers = buffer.getString(at: bodyStart, length: headerSize) ?? ""
        let payload = buffer.getSlice(at: bodyStart + headerSize, length: totalSize - headerSize)!
        let operation = try make(payload, headers)
        buffer.moveReaderIndex(forwardBy: lineLength + totalSize + 2)
        return operation
    }

    private static func split(_ line: String) -> (String, [String]) {
        let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        return (fields.first ?? "", Array(fields.dropFirst()))
    }
}
