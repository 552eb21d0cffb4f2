public import NIOCore

/// Reads server frames from bytes that may arrive split at any point (see PROTOCOL.md). The client's half of the
/// codec.
///
/// A line whose verb it does not know is skipped, so a newer server's payload-less frames do not break an older
/// client. Anything else it cannot read throws ``ServerFrameDecoder/Malformed``: a client cannot resynchronise with
/// a server it does not understand.
public struct ServerFrameDecoder: NIOSingleStepByteToMessageDecoder {
    public typealias InboundOut = ServerFrame

    /// The server sent something this decoder cannot read.
    public struct Malformed: Error, Sendable, Hashable, CustomStringConvertible {
        /// What was wrong.
        public var reason: String
        public var description: String { "the daemon sent a frame this client cannot read: \(reason)" }

        package init(reason: String) {
            self.reason = reason
        }
    }

    /// The longest line accepted; generous, since the server is trusted to follow its own limits.
    public var maxLine: Int
    /// The largest payload accepted.
    public var maxPayload: Int
    /// The topic and unit of the last message read: a topic's messages usually come in runs, and one equal to the
    /// last is taken as it is, not checked and made into a string again.
    private var last = LastNames()

    /// Creates a decoder.
    public init(maxLine: Int = 64 * 1024, maxPayload: Int = ProtocolLimits.largestPayload) {
        self.maxLine = maxLine
        self.maxPayload = maxPayload
    }

    /// Decodes the next frame, or returns nil when more bytes are needed.
    public mutating func decode(buffer: inout ByteBuffer) throws(Malformed) -> ServerFrame? {
        while true {
            // Clamped here, not trusted: the parser compares sizes read off the wire with it and adds them to offsets.
            let parser = ServerFrameParser(
                maxLine: max(1, maxLine),
                maxPayload: min(max(0, maxPayload), ProtocolLimits.largestPayload),
                last: last
            )
            let step = buffer.withUnsafeReadableBytes { parser.parse($0) }
            switch step {
            case .needMoreData:
                return nil
            case .skip(let consumed):
                buffer.moveReaderIndex(forwardBy: consumed)
            case .frame(let frame, let consumed):
                buffer.moveReaderIndex(forwardBy: consumed)
                return frame
            case .message(let kind, let id, let header, let payloadOffset, let size, let consumed):
                let payload = buffer.getSlice(at: buffer.readerIndex + payloadOffset, length: size)!
                buffer.moveReaderIndex(forwardBy: consumed)
                last = LastNames(topic: header.topic, unit: header.publisher.unit)
                let delivery = Delivery(
                    topic: header.topic,
                    sequence: header.sequence,
                    time: header.time,
                    publisher: header.publisher,
                    payload: payload
                )
                switch kind {
                case .delivery: return .delivery(delivery)
                case .latest: return .latest(requestID: id, delivery)
                case .export(let exported): return .export(FleetExport(delivery: delivery, kind: exported))
                case .fleetImport: throw Malformed(reason: "IMPORT is a request")
                }
            case .malformed(let reason):
                throw Malformed(reason: reason)
            }
        }
    }

    /// The connection ended in the middle of a frame: the daemon closed it (stopping, or dropping a subscriber
    /// that fell too far behind) while sending.
    public struct Truncated: Error, Sendable, Hashable, CustomStringConvertible {
        /// The bytes of the incomplete frame.
        public var bytesLeft: Int
        public var description: String { "the daemon closed the connection in the middle of a message" }
    }

    /// At the end of input, decodes what is complete; bytes of a frame cut off by the end throw ``Truncated``.
    public mutating func decodeLast(buffer: inout ByteBuffer, seenEOF: Bool) throws -> ServerFrame? {
        if let frame = try decode(buffer: &buffer) { return frame }
        guard buffer.readableBytes == 0 else {
            let count = buffer.readableBytes
            buffer.moveReaderIndex(to: buffer.writerIndex)
            throw Truncated(bytesLeft: count)
        }
        return nil
    }
}

/// The topic and unit of the last message a decoder read.
private struct LastNames {
    var topic: Topic?
    var unit: String?
}

/// The fields of a `MSG` or `LAST` line.
private struct MessageHeader {
    var topic: Topic
    var sequence: UInt64
    var time: PublishTime
    var publisher: Publisher
}

/// One attempt to parse the server frame at the start of `bytes`; pure, so it can be repeated when more bytes come.
private struct ServerFrameParser {
    enum Step {
        case needMoreData
        case skip(consumed: Int)
        case frame(ServerFrame, consumed: Int)
        case message(MessageFrameKind, id: UInt64?, MessageHeader, payloadOffset: Int, size: Int, consumed: Int)
        case malformed(String)
    }

    let maxLine: Int
    let maxPayload: Int
    let last: LastNames

    func parse(_ bytes: UnsafeRawBufferPointer) -> Step {
        let line: FrameLine
        switch FrameLine.parse(bytes, maxLength: maxLine) {
        case .needMoreData: return .needMoreData
        case .tooLong: return .malformed("a line is longer than \(maxLine) bytes")
        case .empty(let next): return .skip(consumed: next)
        case .badID(let range, _, _): return .malformed("bad request id \(LineScanner.quoted(bytes, range))")
        case .line(let parsed): line = parsed
        }
        let id = line.id
        let verb = line.verb
        let next = line.next
        let lineEnd = line.end
        var tokens = line.arguments
        let verbIs = { (word: StaticString) in LineScanner.equals(bytes, verb, word) }

        if verbIs("MSG") || verbIs("LAST") || verbIs("EXP") {
            var kind: MessageFrameKind = verbIs("MSG") ? .delivery : .latest
            if verbIs("EXP") {
                let word = tokens.next()
                switch word {
                case let word? where LineScanner.equals(bytes, word, "retain"): kind = .export(.retained)
                case let word? where LineScanner.equals(bytes, word, "noretain"): kind = .export(.notRetained)
                case let word? where LineScanner.equals(bytes, word, "clear"): kind = .export(.clear)
                default: return .malformed("bad EXP line \(LineScanner.quoted(bytes, 0..<lineEnd))")
                }
            }
            guard let header = messageHeader(bytes, &tokens), let size = tokens.nextUnsigned(),
                size <= UInt64(maxPayload), tokens.next() == nil
            else { return .malformed("bad message line \(LineScanner.quoted(bytes, 0..<lineEnd))") }
            let payloadSize = Int(size)
            guard next + payloadSize <= bytes.count else { return .needMoreData }
            switch LineScanner.lineBreak(in: bytes, at: next + payloadSize) {
            case .present(let length):
                return .message(
                    kind,
                    id: id,
                    header,
                    payloadOffset: next,
                    size: payloadSize,
                    consumed: next + payloadSize + length
                )
            case .needMoreData: return .needMoreData
            case .absent: return .malformed("a \(payloadSize)-byte payload is not followed by a line break")
            }
        }
        if verbIs("OK") {
            guard let valueRange = tokens.next() else { return .frame(.ok(requestID: id, value: nil), consumed: next) }
            guard let value = LineScanner.unsigned(bytes, valueRange), tokens.next() == nil else {
                return .malformed("bad OK line \(LineScanner.quoted(bytes, 0..<lineEnd))")
            }
            return .frame(.ok(requestID: id, value: value), consumed: next)
        }
        if verbIs("DROP") {
            guard let topicRange = tokens.next(), case .success(let name) = topicName(bytes, topicRange),
                let countRange = tokens.next(), let count = LineScanner.unsigned(bytes, countRange),
                let firstRange = tokens.next(), let first = LineScanner.unsigned(bytes, firstRange),
                let lastRange = tokens.next(), let last = LineScanner.unsigned(bytes, lastRange)
            else { return .malformed("bad DROP line \(LineScanner.quoted(bytes, 0..<lineEnd))") }
            var notice = DropNotice(topic: Topic(unchecked: name), count: count, firstSequence: first, lastSequence: last)
            // `reason=` (protocol 5); other tokens a newer daemon may add are passed over.
            while let token = tokens.next() {
                if let (key, value) = keyValue(bytes, token), LineScanner.equals(bytes, key, "reason"), !value.isEmpty {
                    notice.reason = DropReason(rawValue: string(bytes, value))
                }
            }
            if let id { return .frame(.missed(requestID: id, notice), consumed: next) }
            return .frame(.dropped(notice), consumed: next)
        }
        if verbIs("PONG") {
            return .frame(.pong(requestID: id), consumed: next)
        }
        if verbIs("ERR") {
            guard let codeRange = tokens.next() else { return .malformed("ERR without a code") }
            let code = ErrorCode(rawValue: string(bytes, codeRange))
            let message = string(bytes, tokens.rest())
            return .frame(.error(ProtocolError(code, message, requestID: id)), consumed: next)
        }
        if verbIs("HELLO") {
            guard let serverRange = tokens.next(), let versionRange = tokens.next(),
                let version = LineScanner.unsigned(bytes, versionRange)
            else { return .malformed("bad greeting \(LineScanner.quoted(bytes, 0..<lineEnd))") }
            var limits = ProtocolLimits.default
            while let pair = tokens.next() {
                guard let (key, value) = keyValue(bytes, pair), let number = LineScanner.unsigned(bytes, value) else {
                    continue
                }
                let clamped = Int(clamping: number)
                if LineScanner.equals(bytes, key, "max_payload") { limits.maxPayload = clamped }
                if LineScanner.equals(bytes, key, "max_topic") { limits.maxTopic = clamped }
                if LineScanner.equals(bytes, key, "max_line") { limits.maxLine = clamped }
            }
            let greeting = ServerGreeting(server: string(bytes, serverRange), version: version, limits: limits)
            return .frame(.hello(greeting), consumed: next)
        }
        if verbIs("TOPICS") || verbIs("STATS") {
            let isTopics = verbIs("TOPICS")
            guard let countRange = tokens.next(), let count = LineScanner.unsigned(bytes, countRange),
                tokens.next() == nil
            else { return .malformed("bad list header \(LineScanner.quoted(bytes, 0..<lineEnd))") }
            var topics: [TopicInfo] = []
            var counters: [ServerStats.Counter] = []
            var offset = next
            var remaining = count
            while remaining > 0 {
                switch LineScanner.findLine(in: bytes, from: offset, maxLength: maxLine) {
                case .incomplete: return .needMoreData
                case .tooLong: return .malformed("a list line is longer than \(maxLine) bytes")
                case .found(let contentEnd, let nextLine):
                    if isTopics {
                        guard let info = topicInfo(bytes, offset..<contentEnd) else {
                            return .malformed("bad TOPICS line \(LineScanner.quoted(bytes, offset..<contentEnd))")
                        }
                        topics.append(info)
                    } else {
                        var fields = Tokenizer(bytes, from: offset, to: contentEnd)
                        guard let name = fields.next(), let valueRange = fields.next(),
                            let value = LineScanner.unsigned(bytes, valueRange)
                        else { return .malformed("bad STATS line \(LineScanner.quoted(bytes, offset..<contentEnd))") }
                        counters.append(ServerStats.Counter(name: string(bytes, name), value: value))
                    }
                    offset = nextLine
                }
                remaining -= 1
            }
            let frame: ServerFrame =
                isTopics ? .topics(requestID: id, topics) : .stats(requestID: id, ServerStats(counters: counters))
            return .frame(frame, consumed: offset)
        }
        if verbIs("EXPLAIN") {
            guard let uidRange = tokens.next(), let uid = LineScanner.unsigned(bytes, uidRange).flatMap(UInt32.init(exactly:)),
                let countRange = tokens.next(), let count = LineScanner.unsigned(bytes, countRange), tokens.next() == nil
            else { return .malformed("bad EXPLAIN header \(LineScanner.quoted(bytes, 0..<lineEnd))") }
            var decisions: [AccessExplanation.Decision] = []
            var offset = next
            for _ in 0..<count {
                switch LineScanner.findLine(in: bytes, from: offset, maxLength: maxLine) {
                case .incomplete: return .needMoreData
                case .tooLong: return .malformed("an EXPLAIN line is longer than \(maxLine) bytes")
                case .found(let contentEnd, let nextLine):
                    var fields = Tokenizer(bytes, from: offset, to: contentEnd)
                    guard let access = fields.next(), let effect = fields.next(),
                        LineScanner.equals(bytes, effect, "allow") || LineScanner.equals(bytes, effect, "deny")
                    else { return .malformed("bad EXPLAIN line \(LineScanner.quoted(bytes, offset..<contentEnd))") }
                    let rule = fields.next().map { string(bytes, $0.lowerBound..<contentEnd) } ?? ""
                    decisions.append(
                        AccessExplanation.Decision(
                            access: string(bytes, access),
                            isAllowed: LineScanner.equals(bytes, effect, "allow"),
                            rule: rule
                        )
                    )
                    offset = nextLine
                }
            }
            return .frame(.explanation(requestID: id, AccessExplanation(uid: uid, decisions: decisions)), consumed: offset)
        }
        // A frame this version does not know; newer servers only add ones without payloads (PROTOCOL.md).
        return .skip(consumed: next)
    }

    private func messageHeader(_ bytes: UnsafeRawBufferPointer, _ tokens: inout Tokenizer) -> MessageHeader? {
        guard let topicRange = tokens.next(), let topic = topic(bytes, topicRange),
            let sequence = tokens.nextUnsigned(), let time = tokens.nextUnsigned(),
            let uid = tokens.nextUnsigned(), uid <= UInt32.max,
            let pid = tokens.nextUnsigned(), pid <= Int32.max,
            let unitRange = tokens.next()
        else { return nil }
        // `<host>/<unit>` for a message from another host (federation); a unit name never holds a `/`.
        var unitStart = unitRange.lowerBound
        var host: String?
        if let slash = bytes[unitRange].firstIndex(of: UInt8(ascii: "/")) {
            host = string(bytes, unitRange.lowerBound..<slash)
            unitStart = slash + 1
        }
        let unitBytes = unitStart..<unitRange.upperBound
        let unit: String?
        if unitBytes.isEmpty || LineScanner.equals(bytes, unitBytes, "-") {
            unit = nil
        } else if let lastUnit = last.unit, lastUnit.hasBytes(UnsafeRawBufferPointer(rebasing: bytes[unitBytes])) {
            unit = lastUnit
        } else {
            unit = string(bytes, unitBytes)
        }
        return MessageHeader(
            topic: topic,
            sequence: sequence,
            time: PublishTime(microsecondsSinceEpoch: time),
            publisher: Publisher(uid: UInt32(uid), pid: Int32(pid), unit: unit, host: host)
        )
    }

    private func topicInfo(_ bytes: UnsafeRawBufferPointer, _ line: Range<Int>) -> TopicInfo? {
        var fields = Tokenizer(bytes, from: line.lowerBound, to: line.upperBound)
        guard let topicRange = fields.next(), case .success(let name) = topicName(bytes, topicRange) else {
            return nil
        }
        var info = TopicInfo(
            topic: Topic(unchecked: name),
            sequence: 0,
            retainedBytes: nil,
            published: 0,
            delivered: 0,
            lastPublished: nil
        )
        while let field = fields.next() {
            guard let (key, valueRange) = keyValue(bytes, field) else { return nil }
            let value = LineScanner.unsigned(bytes, valueRange)
            if LineScanner.equals(bytes, key, "seq") {
                info.sequence = value ?? 0
            } else if LineScanner.equals(bytes, key, "retained") {
                info.retainedBytes = value.map { Int(clamping: $0) }
            } else if LineScanner.equals(bytes, key, "published") {
                info.published = value ?? 0
            } else if LineScanner.equals(bytes, key, "delivered") {
                info.delivered = value ?? 0
            } else if LineScanner.equals(bytes, key, "time") {
                info.lastPublished = value.map { PublishTime(microsecondsSinceEpoch: $0) }
            } else if LineScanner.equals(bytes, key, "dropped") {
                info.dropped = value ?? 0
            }
        }
        return info
    }

    /// The topic named by `range`: the last message's, when it is the same, else checked and made anew.
    private func topic(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) -> Topic? {
        if let topic = last.topic, topic.hasName(UnsafeRawBufferPointer(rebasing: bytes[range])) { return topic }
        guard case .success(let name) = topicName(bytes, range) else { return nil }
        return Topic(unchecked: name)
    }

    private func topicName(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) -> Result<String, TopicError> {
        TopicSyntax.string(from: UnsafeRawBufferPointer(rebasing: bytes[range]), kind: .topic, maxLength: Topic.maxLength)
    }

    /// Splits `key=value`.
    private func keyValue(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) -> (Range<Int>, Range<Int>)? {
        guard let equals = range.first(where: { bytes[$0] == UInt8(ascii: "=") }) else { return nil }
        return (range.lowerBound..<equals, equals + 1..<range.upperBound)
    }

    private func string(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) -> String {
        String(decoding: UnsafeRawBufferPointer(rebasing: bytes[range]), as: UTF8.self)
    }
}
