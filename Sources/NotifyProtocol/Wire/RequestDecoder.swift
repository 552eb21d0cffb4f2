public import NIOCore

/// What the server's decoder makes of the next frame: a request to carry out, or an error to send back.
public enum DecodedRequest: Sendable, Hashable {
    /// A well-formed request.
    case request(Request)
    /// A refused frame. Send it back as `ERR`; if ``ProtocolError/closesConnection`` is set, close the connection
    /// after that, as the decoder no longer knows where the next frame starts.
    case failure(ProtocolError)
}

/// A `PUB` read in place: its payload is left in the buffer it was read from, at ``payload`` (indices of that buffer),
/// for whoever carries it out to read there, without a slice of the buffer or a ``Request`` made for it.
public struct PublishFrame: Sendable, Hashable {
    /// The request id, if the client gave one.
    public let id: UInt64?
    /// The topic published to.
    public let topic: Topic
    /// Whether it is retained and acknowledged.
    public let options: PublishOptions
    /// Where the payload is in the buffer the frame was read from (which keeps it until that buffer is next read).
    public let payload: Range<Int>

    /// The request it is, its payload a view of `buffer` (the one it was read from, whose reader index has moved
    /// past it: a slice can no longer be taken there).
    public func request(in buffer: ByteBuffer) -> Request {
        var bytes = buffer
        bytes.moveReaderIndex(to: payload.lowerBound)
        bytes.moveWriterIndex(to: payload.upperBound)
        return Request(id: id, .publish(topic, payload: bytes, options))
    }
}

/// What ``RequestDecoder/decodeInPlace(buffer:)`` read: a publish left in place, or any other frame.
public enum DecodedFrame: Sendable, Hashable {
    /// A well-formed `PUB`, its payload left in the buffer.
    case publish(PublishFrame)
    /// Any other request, or a refused frame.
    case other(DecodedRequest)
}

/// Reads client requests from bytes that may arrive split at any point (see PROTOCOL.md).
///
/// The decoder is a function of the bytes it is given, with one piece of state: how many bytes of a refused
/// payload are still to be skipped. A `PUB` whose size is over the limit is refused as soon as its line is read,
/// and its payload is discarded as it arrives, never buffered. A line longer than the limit is refused once that
/// many bytes are in, without waiting for its end. So the bytes held for one connection never exceed one line plus
/// one allowed payload.
///
/// Use it with NIO's `ByteToMessageHandler`, or feed it with `NIOSingleStepByteToMessageProcessor` where there is
/// no channel (tests, fuzzing).
public struct RequestDecoder: NIOSingleStepByteToMessageDecoder {
    public typealias InboundOut = DecodedRequest

    /// The sizes this decoder accepts.
    public let limits: ProtocolLimits

    /// Payload bytes of a refused `PUB` still to be discarded.
    private var bytesToSkip = 0
    /// Set after an error that closes the connection: everything after it is ignored.
    private var hasFailed = false
    /// The topic of the last `PUB`. A publisher usually publishes to the same few topics, and a name over 15 bytes
    /// would cost an allocation per message to make anew (Swift's small strings hold 15); the same bytes again
    /// reuse it, already checked.
    private var lastPublishedTopic: Topic?

    /// Creates a decoder enforcing `limits`.
    public init(limits: ProtocolLimits = .default) {
        self.limits = limits
    }

    /// Decodes the next frame, or returns nil when more bytes are needed.
    public mutating func decode(buffer: inout ByteBuffer) -> DecodedRequest? {
        switch decodeInPlace(buffer: &buffer) {
        case .publish(let frame): .request(frame.request(in: buffer))
        case .other(let decoded): decoded
        case nil: nil
        }
    }

    /// Decodes the next frame, leaving a `PUB`'s payload where it is in `buffer` (the reader index moves past it, the
    /// bytes stay until the buffer is written to or let go of); nil when more bytes are needed. The daemon's hot
    /// path: a publish costs no slice of the receive buffer (a reference counted) and no ``Request``.
    public mutating func decodeInPlace(buffer: inout ByteBuffer) -> DecodedFrame? {
        while true {
            if hasFailed {
                buffer.moveReaderIndex(to: buffer.writerIndex)
                return nil
            }
            if bytesToSkip > 0 {
                let skipped = min(bytesToSkip, buffer.readableBytes)
                buffer.moveReaderIndex(forwardBy: skipped)
                bytesToSkip -= skipped
                if bytesToSkip > 0 { return nil }
            }
            let limits = self.limits
            let recent = lastPublishedTopic
            let step = buffer.withUnsafeReadableBytes { RequestParser(bytes: $0, limits: limits, recentTopic: recent).parseFrame() }
            switch step {
            case .needMoreData:
                return nil
            case .emptyLine(let consumed):
                buffer.moveReaderIndex(forwardBy: consumed)
            case .request(let request, let consumed):
                buffer.moveReaderIndex(forwardBy: consumed)
                return .other(.request(request))
            case .publish(let id, let topic, let options, let payloadOffset, let size, let consumed):
                let start = buffer.readerIndex + payloadOffset
                buffer.moveReaderIndex(forwardBy: consumed)
                lastPublishedTopic = topic
                return .publish(PublishFrame(id: id, topic: topic, options: options, payload: start..<(start + size)))
            case .importMessage(let id, var message, let payloadOffset, let size, let consumed):
                message.delivery.payload = buffer.getSlice(at: buffer.readerIndex + payloadOffset, length: size)!
                buffer.moveReaderIndex(forwardBy: consumed)
                return .other(.request(Request(id: id, .importMessage(message))))
            case .failure(let error, let consumed, let payloadToSkip):
                buffer.moveReaderIndex(forwardBy: consumed)
                bytesToSkip = payloadToSkip
                if error.closesConnection {
                    hasFailed = true
                    buffer.moveReaderIndex(to: buffer.writerIndex)
                }
                return .other(.failure(error))
            }
        }
    }

    /// At the end of input, decodes what is complete; a frame cut off by the client going away is dropped, as there
    /// is nobody left to answer.
    public mutating func decodeLast(buffer: inout ByteBuffer, seenEOF: Bool) -> DecodedRequest? {
        if let decoded = decode(buffer: &buffer) { return decoded }
        buffer.moveReaderIndex(to: buffer.writerIndex)
        return nil
    }
}

/// One attempt to parse the frame at the start of `bytes`; pure, so it can simply be repeated when more bytes come.
struct RequestParser {
    enum Step {
        case needMoreData
        case emptyLine(consumed: Int)
        case request(Request, consumed: Int)
        case publish(id: UInt64?, topic: Topic, options: PublishOptions, payloadOffset: Int, size: Int, consumed: Int)
        /// An `IMPORT`: the request, whose payload is at `payloadOffset`, `size` bytes. Boxed, so that every step
        /// of the parser, a `PUB`'s too, is not the size of an import (see ``Command/importMessage(_:)``).
        indirect case importMessage(id: UInt64?, FleetImport, payloadOffset: Int, size: Int, consumed: Int)
        case failure(ProtocolError, consumed: Int, payloadToSkip: Int)
    }

    let bytes: UnsafeRawBufferPointer
    let limits: ProtocolLimits
    /// A topic checked before, returned as it is when the bytes name it again.
    var recentTopic: Topic? = nil

    static let operations = "PUB SUB UNSUB LATEST CLEAR HISTORY TOPICS STATS EXPLAIN PING OPT (and, for the fleet service, FOLLOW IMPORT MISSED FLEETSTATS)"

    /// `PUB <the recent topic> <size>\n` or `PUB <the recent topic> <size> noretain\n` and its payload, in exactly
    /// that form (the forms the client library and `notify send` write): most frames of a busy publisher, read here
    /// without the general line parser. Any other form (an id, other options, another topic, other spacing, case or
    /// line break, a size over the limit, a frame not whole yet) returns nil and takes the general way, which reads
    /// these forms the same.
    private func publishToRecentTopic(_ topic: Topic) -> Step? {
        let prefix = 4  // "PUB "
        guard bytes.count > prefix, UInt32(littleEndian: bytes.loadUnaligned(as: UInt32.self)) == 0x2042_5550 else { return nil }
        let nameEnd = prefix + topic.name.utf8.count
        guard nameEnd < bytes.count, bytes[nameEnd] == UInt8(ascii: " "),
            topic.hasName(UnsafeRawBufferPointer(rebasing: bytes[prefix..<nameEnd]))
        else { return nil }
        var index = nameEnd + 1
        var size = 0
        // At most 9 digits: a size that cannot overflow, and any larger one is over every limit anyway.
        while index < bytes.count, index - nameEnd <= 9, case let digit = bytes[index] &- UInt8(ascii: "0"), digit < 10 {
            size = size * 10 + Int(digit)
            index += 1
        }
        guard index > nameEnd + 1, size <= limits.maxPayload else { return nil }
        var options = PublishOptions()
        if index < bytes.count, bytes[index] == UInt8(ascii: " ") {
            let noretain: StaticString = " noretain"
            let end = index + noretain.utf8CodeUnitCount
            guard end < bytes.count,
                bytes[index..<end].elementsEqual(UnsafeRawBufferPointer(start: noretain.utf8Start, count: noretain.utf8CodeUnitCount))
            else { return nil }
            options.retain = false
            index = end
        }
        guard index < bytes.count, bytes[index] == UInt8(ascii: "\n"), index + 1 < limits.maxLine else { return nil }
        let payload = index + 1
        guard payload + size < bytes.count, bytes[payload + size] == UInt8(ascii: "\n") else { return nil }
        return .publish(id: nil, topic: topic, options: options, payloadOffset: payload, size: size, consumed: payload + size + 1)
    }

    /// For a `since=` token, the point it names (nil inside when it names none); nil for any other token.
    private func resumePoint(_ token: Range<Int>) -> ResumePoint?? {
        let prefix = "since=".utf8.count
        guard token.count > prefix, LineScanner.equalsIgnoringCase(bytes, token.lowerBound..<token.lowerBound + prefix, "SINCE=")
        else { return nil }
        let value = token.lowerBound + prefix..<token.upperBound
        if let sequence = LineScanner.unsigned(bytes, value) { return .some(.sequence(sequence)) }
        let text = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[value]), as: UTF8.self)
        return .some(PublishTime(rfc3339: text).map { .time($0) })
    }

    /// `overflow=<policy>`, or nil when the token is something else or names no policy.
    private func overflowPolicy(_ token: Range<Int>) -> OverflowPolicy? {
        let prefix = "overflow=".utf8.count
        guard token.count > prefix, LineScanner.equalsIgnoringCase(bytes, token.lowerBound..<token.lowerBound + prefix, "OVERFLOW=") else {
            return nil
        }
        let value = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[(token.lowerBound + prefix)..<token.upperBound]), as: UTF8.self)
        return OverflowPolicy(rawValue: value.lowercased())
    }

    func parseFrame() -> Step {
        if let recentTopic, let publish = publishToRecentTopic(recentTopic) { return publish }
        let line: FrameLine
        switch FrameLine.parse(bytes, maxLength: limits.maxLine) {
        case .needMoreData:
            return .needMoreData
        case .tooLong:
            let error = ProtocolError(
                .malformed,
                "line is longer than \(limits.maxLine) bytes (max_line) without a line break; closing the connection",
                closesConnection: true
            )
            return .failure(error, consumed: 0, payloadToSkip: 0)
        case .empty(let next):
            return .emptyLine(consumed: next)
        case .badID(let range, let id?, let next):
            let sentence = "request id \(LineScanner.quoted(bytes, range)) is not followed by an operation"
            return .failure(ProtocolError(.malformed, sentence, requestID: id), consumed: next, payloadToSkip: 0)
        case .badID(let range, nil, let next):
            let sentence = "request id \(LineScanner.quoted(bytes, range)) is not # followed by a number from 0 to \(UInt64.max)"
            return .failure(ProtocolError(.malformed, sentence), consumed: next, payloadToSkip: 0)
        case .line(let parsed):
            line = parsed
        }
        let id = line.id
        let verb = line.verb
        let next = line.next
        var tokens = line.arguments

        func fail(_ code: ErrorCode, _ sentence: String, skipping: Int = 0) -> Step {
            .failure(ProtocolError(code, sentence, requestID: id), consumed: next, payloadToSkip: skipping)
        }
        func done(_ command: Command) -> Step {
            .request(Request(id: id, command), consumed: next)
        }
        func topic(_ range: Range<Int>) -> Result<Topic, ProtocolError> {
            if let recentTopic, recentTopic.hasName(UnsafeRawBufferPointer(rebasing: bytes[range])) { return .success(recentTopic) }
            return topicOrPattern(range, kind: .topic).map { Topic(unchecked: $0) }
        }
        func pattern(_ range: Range<Int>) -> Result<TopicPattern, ProtocolError> {
            topicOrPattern(range, kind: .pattern).map { TopicPattern(unchecked: $0) }
        }
        /// The command made from a valid topic or pattern, or the `invalid-topic` error.
        func with<Name>(_ name: Result<Name, ProtocolError>, _ make: (Name) -> Command) -> Step {
            switch name {
            case .success(let valid): return done(make(valid))
            case .failure(let error): return .failure(error, consumed: next, payloadToSkip: 0)
            }
        }
        func topicOrPattern(_ range: Range<Int>, kind: TopicSyntax.Kind) -> Result<String, ProtocolError> {
            TopicSyntax.string(from: UnsafeRawBufferPointer(rebasing: bytes[range]), kind: kind, maxLength: limits.maxTopic)
                .mapError { ProtocolError(.invalidTopic, $0.description, requestID: id) }
        }

        let verbIs = { (word: StaticString) in LineScanner.equalsIgnoringCase(bytes, verb, word) }

        if verbIs("PUB") {
            let usage = "PUB <topic> <size> [noretain] [ack], then the payload and a line break"
            guard let topicRange = tokens.next(), let sizeRange = tokens.next() else {
                return fail(.malformed, "PUB needs a topic and a payload size: \(usage)")
            }
            guard let declared = LineScanner.unsigned(bytes, sizeRange, saturating: true) else {
                return fail(.malformed, "payload size \(LineScanner.quoted(bytes, sizeRange)) is not a number: \(usage)")
            }
            // A size past what memory can hold is just too large: its bytes are skipped as it says.
            let size = Int(clamping: declared)
            var options = PublishOptions()
            while let option = tokens.next() {
                if LineScanner.equalsIgnoringCase(bytes, option, "NORETAIN") {
                    options.retain = false
                } else if LineScanner.equalsIgnoringCase(bytes, option, "ACK") {
                    options.acknowledge = true
                } else {
                    let sentence = "unknown option \(LineScanner.quoted(bytes, option)) for PUB; the options are noretain and ack"
                    return fail(.malformed, sentence, skipping: size)
                }
            }
            if size > limits.maxPayload {
                let sentence = "payload of \(declared) bytes is over this server's limit of \(limits.maxPayload) bytes (max_payload)"
                return fail(.payloadTooLarge, sentence, skipping: size)
            }
            let parsedTopic: Topic
            switch topic(topicRange) {
            case .success(let valid): parsedTopic = valid
            case .failure(let error): return .failure(error, consumed: next, payloadToSkip: size)
            }
            guard next + size <= bytes.count else { return .needMoreData }
            switch LineScanner.lineBreak(in: bytes, at: next + size) {
            case .present(let breakLength):
                return .publish(
                    id: id,
                    topic: parsedTopic,
                    options: options,
                    payloadOffset: next,
                    size: size,
                    consumed: next + size + breakLength
                )
            case .needMoreData:
                return .needMoreData
            case .absent:
                let sentence =
                    "the \(size)-byte payload is not followed by a line break; the size on the PUB line must be the"
                    + " exact number of payload bytes. Closing the connection"
                return .failure(
                    ProtocolError(.malformed, sentence, requestID: id, closesConnection: true),
                    consumed: next,
                    payloadToSkip: 0
                )
            }
        }

        // The fleet service's requests, IMPORT the most frequent of all but PUB: before the rest.
        if let fleet = parseFleetRequest(line) { return fleet }

        if verbIs("SUB") {
            let usage = "SUB <pattern> [latest | since=<sequence>|<RFC 3339 time>] [overflow=drop-oldest|latest-only|disconnect]"
            guard let patternRange = tokens.next() else {
                return fail(.malformed, "SUB needs a pattern: \(usage)")
            }
            var options = SubscribeOptions()
            while let option = tokens.next() {
                if LineScanner.equalsIgnoringCase(bytes, option, "LATEST") {
                    options.latestFirst = true
                } else if let policy = overflowPolicy(option) {
                    options.overflow = policy
                } else if let since = resumePoint(option) {
                    guard let point = since else {
                        return fail(.malformed, "since= takes a sequence number or an RFC 3339 time (2026-11-25T09:30:00Z): \(usage)")
                    }
                    options.since = point
                } else {
                    return fail(.malformed, "unknown option \(LineScanner.quoted(bytes, option)) for SUB: \(usage)")
                }
            }
            if options.latestFirst && options.since != nil {
                return fail(.malformed, "SUB takes latest or since=, not both: \(usage)")
            }
            if case .sequence? = options.since, bytes[patternRange].contains(where: { $0 == UInt8(ascii: "*") || $0 == UInt8(ascii: ">") }) {
                return fail(.malformed, "since=<sequence> resumes one topic, named exactly; for a pattern, give a time: \(usage)")
            }
            return with(pattern(patternRange)) { .subscribe($0, options) }
        }

        if verbIs("UNSUB") {
            guard let patternRange = tokens.next(), tokens.next() == nil else {
                return fail(.malformed, "UNSUB takes one pattern: UNSUB <pattern>")
            }
            return with(pattern(patternRange)) { .unsubscribe($0) }
        }

        if verbIs("LATEST") || verbIs("CLEAR") {
            let name = verbIs("LATEST") ? "LATEST" : "CLEAR"
            guard let topicRange = tokens.next(), tokens.next() == nil else {
                return fail(.malformed, "\(name) takes one topic: \(name) <topic>")
            }
            return with(topic(topicRange)) { name == "LATEST" ? .latest($0) : .clear($0) }
        }

        if verbIs("HISTORY") {
            let usage = "HISTORY <topic> [<count>]"
            guard let topicRange = tokens.next() else { return fail(.malformed, "HISTORY needs a topic: \(usage)") }
            var count: Int?
            if let countRange = tokens.next() {
                guard let value = LineScanner.unsigned(bytes, countRange), value <= UInt64(Int32.max), tokens.next() == nil else {
                    return fail(.malformed, "HISTORY takes a topic and a count: \(usage)")
                }
                count = Int(value)
            }
            return with(topic(topicRange)) { .history($0, count: count) }
        }

        if verbIs("TOPICS") {
            let usage = "TOPICS [<pattern>] [after=<topic>]"
            var patternRange: Range<Int>?
            var afterRange: Range<Int>?
            let afterKey = "after=".utf8.count
            while let token = tokens.next() {
                if token.count > afterKey, LineScanner.equalsIgnoringCase(bytes, token.lowerBound..<token.lowerBound + afterKey, "AFTER="),
                    afterRange == nil
                {
                    afterRange = (token.lowerBound + afterKey)..<token.upperBound
                } else if patternRange == nil && afterRange == nil {
                    patternRange = token
                } else {
                    return fail(.malformed, "TOPICS takes at most one pattern, then after=<topic>: \(usage)")
                }
            }
            var after: Topic?
            if let afterRange {
                switch topic(afterRange) {
                case .success(let valid): after = valid
                case .failure(let error): return .failure(error, consumed: next, payloadToSkip: 0)
                }
            }
            guard let patternRange else { return done(.topics(nil, after: after)) }
            return with(pattern(patternRange)) { .topics($0, after: after) }
        }

        if verbIs("EXPLAIN") {
            let usage = "EXPLAIN <topic> [<uid>]"
            guard let topicRange = tokens.next() else { return fail(.malformed, "EXPLAIN takes a topic: \(usage)") }
            var uid: UInt32?
            if let uidRange = tokens.next() {
                guard let number = LineScanner.unsigned(bytes, uidRange), let value = UInt32(exactly: number), tokens.next() == nil else {
                    return fail(.malformed, "EXPLAIN takes a topic and, for root, a uid: \(usage)")
                }
                uid = value
            }
            return with(topic(topicRange)) { .explain($0, uid: uid) }
        }

        if verbIs("STATS") || verbIs("PING") {
            let name = verbIs("STATS") ? "STATS" : "PING"
            guard tokens.next() == nil else { return fail(.malformed, "\(name) takes no arguments") }
            return done(name == "STATS" ? .stats : .ping)
        }

        if verbIs("OPT") {
            guard let option = tokens.next(), tokens.next() == nil else {
                return fail(.malformed, "OPT takes one option: noecho, echo, pause or resume")
            }
            if LineScanner.equalsIgnoringCase(bytes, option, "NOECHO") { return done(.setEcho(false)) }
            if LineScanner.equalsIgnoringCase(bytes, option, "ECHO") { return done(.setEcho(true)) }
            if LineScanner.equalsIgnoringCase(bytes, option, "PAUSE") { return done(.setDeliveriesPaused(true)) }
            if LineScanner.equalsIgnoringCase(bytes, option, "RESUME") { return done(.setDeliveriesPaused(false)) }
            return fail(
                .malformed,
                "unknown option \(LineScanner.quoted(bytes, option)) for OPT; the options are noecho, echo, pause and resume"
            )
        }

        return fail(
            .unknownOperation,
            "unknown operation \(LineScanner.quoted(bytes, verb)); the operations are \(RequestParser.operations)"
        )
    }
}
