import NIOCore

/// The fleet service's requests (protocol 5; PROTOCOL.md, "The fleet service"): parsed like any other, bounded the
/// same way. Whether the connection may make them is the daemon's to decide, by its peer's uid.
extension RequestParser {
    /// The most counters one `FLEETSTATS` may carry, and the longest name: what `STATS` shows is bounded whatever the
    /// fleet service sends.
    static let fleetCounterLimit = 256
    static let fleetCounterNameLimit = 64
    /// The largest `FLEETSTATS` payload: far more than 256 lines of a name and a number take.
    static let fleetStatsLimit = 32 * 1024

    /// The step for a fleet request on `line`, or nil when its verb is not one.
    func parseFleetRequest(_ line: FrameLine) -> Step? {
        let id = line.id
        let next = line.next
        var tokens = line.arguments
        func fail(_ code: ErrorCode, _ sentence: String, skipping: Int = 0) -> Step {
            .failure(ProtocolError(code, sentence, requestID: id), consumed: next, payloadToSkip: skipping)
        }
        func name(_ range: Range<Int>, _ kind: TopicSyntax.Kind) -> Result<String, ProtocolError> {
            TopicSyntax.string(from: UnsafeRawBufferPointer(rebasing: bytes[range]), kind: kind, maxLength: limits.maxTopic)
                .mapError { ProtocolError(.invalidTopic, $0.description, requestID: id) }
        }
        // A fleet verb starts with I, F or M: any other request passes on after one look.
        guard let first = line.verb.first.map({ bytes[$0] | 0x20 }), first == UInt8(ascii: "i") || first == UInt8(ascii: "f") || first == UInt8(ascii: "m")
        else { return nil }
        let verbIs = { (word: StaticString) in LineScanner.equalsIgnoringCase(bytes, line.verb, word) }

        if verbIs("IMPORT") {
            let usage = "IMPORT retain|noretain|clear|replay|replay-clear <topic> <seq> <time> <uid> <pid> <host>/<unit> <size>, then the payload"
            guard let kindRange = tokens.next(), let topicRange = tokens.next(), let sequence = tokens.nextUnsigned(),
                let time = tokens.nextUnsigned(), let uid = tokens.nextUnsigned(), let pid = tokens.nextUnsigned(),
                let originRange = tokens.next(), let sizeRange = tokens.next(), tokens.next() == nil,
                let declared = LineScanner.unsigned(bytes, sizeRange, saturating: true)
            else { return fail(.malformed, "bad IMPORT line: \(usage)") }
            let size = Int(clamping: declared)
            let kind: FleetMessageKind
            var replayed = false
            if LineScanner.equalsIgnoringCase(bytes, kindRange, "RETAIN") {
                kind = .retained
            } else if LineScanner.equalsIgnoringCase(bytes, kindRange, "NORETAIN") {
                kind = .notRetained
            } else if LineScanner.equalsIgnoringCase(bytes, kindRange, "CLEAR") {
                kind = .clear
            } else if LineScanner.equalsIgnoringCase(bytes, kindRange, "REPLAY") {
                (kind, replayed) = (.retained, true)
            } else if LineScanner.equalsIgnoringCase(bytes, kindRange, "REPLAY-CLEAR") {
                (kind, replayed) = (.clear, true)
            } else {
                return fail(.malformed, "unknown kind \(LineScanner.quoted(bytes, kindRange)): \(usage)", skipping: size)
            }
            if size > limits.maxPayload {
                return fail(.payloadTooLarge, "payload of \(declared) bytes is over this server's limit of \(limits.maxPayload) bytes (max_payload)", skipping: size)
            }
            // The claims are checked by the daemon (ImportedMessage); here only what must fit the types: a uid is 32
            // bits, a pid 31, and the origin is `<host>/<unit>` with a host before the slash.
            guard uid <= UInt64(UInt32.max), pid <= UInt64(Int32.max),
                let slash = bytes[originRange].firstIndex(of: UInt8(ascii: "/")), slash > originRange.lowerBound
            else { return fail(.malformed, "bad IMPORT line: \(usage)", skipping: size) }
            let topic: Topic
            switch name(topicRange, .topic) {
            case .success(let text): topic = Topic(unchecked: text)
            case .failure(let error): return .failure(error, consumed: next, payloadToSkip: size)
            }
            guard next + size <= bytes.count else { return .needMoreData }
            guard case .present(let breakLength) = LineScanner.lineBreak(in: bytes, at: next + size) else {
                if case .needMoreData = LineScanner.lineBreak(in: bytes, at: next + size) { return .needMoreData }
                let error = ProtocolError(.malformed, "the \(size)-byte payload is not followed by a line break. Closing the connection", requestID: id, closesConnection: true)
                return .failure(error, consumed: next, payloadToSkip: 0)
            }
            let unitBytes = (slash + 1)..<originRange.upperBound
            let unit = unitBytes.isEmpty || LineScanner.equals(bytes, unitBytes, "-") ? nil : string(unitBytes)
            let message = FleetImport(
                delivery: Delivery(
                    topic: topic,
                    sequence: sequence,
                    time: PublishTime(microsecondsSinceEpoch: time),
                    publisher: Publisher(uid: UInt32(uid), pid: Int32(pid), unit: unit, host: string(originRange.lowerBound..<slash)),
                    payload: ByteBuffer()
                ),
                kind: kind,
                replayed: replayed
            )
            return .importMessage(id: id, message, payloadOffset: next, size: size, consumed: next + size + breakLength)
        }

        if verbIs("FOLLOW") {
            var patterns: [TopicPattern] = []
            while let range = tokens.next() {
                switch name(range, .pattern) {
                case .success(let text): patterns.append(TopicPattern(unchecked: text))
                case .failure(let error): return .failure(error, consumed: next, payloadToSkip: 0)
                }
            }
            guard !patterns.isEmpty else { return fail(.malformed, "FOLLOW needs the patterns of what is exported: FOLLOW <pattern>...") }
            return .request(Request(id: id, .follow(patterns)), consumed: next)
        }

        if verbIs("MISSED") {
            guard let countRange = tokens.next(), let count = LineScanner.unsigned(bytes, countRange), tokens.next() == nil else {
                return fail(.malformed, "MISSED takes a count: MISSED <count>")
            }
            return .request(Request(id: id, .announceMissed(count)), consumed: next)
        }

        if verbIs("FLEETSTATS") {
            let usage = "FLEETSTATS <size>, then lines of <name> <value>"
            guard let sizeRange = tokens.next(), tokens.next() == nil, let declared = LineScanner.unsigned(bytes, sizeRange, saturating: true) else {
                return fail(.malformed, "bad FLEETSTATS line: \(usage)")
            }
            let size = Int(clamping: declared)
            guard size <= Self.fleetStatsLimit else {
                return fail(.payloadTooLarge, "FLEETSTATS of \(declared) bytes is over \(Self.fleetStatsLimit)", skipping: size)
            }
            guard next + size <= bytes.count else { return .needMoreData }
            let end = next + size
            guard case .present(let breakLength) = LineScanner.lineBreak(in: bytes, at: end) else {
                if case .needMoreData = LineScanner.lineBreak(in: bytes, at: end) { return .needMoreData }
                let error = ProtocolError(.malformed, "the \(size)-byte payload is not followed by a line break. Closing the connection", requestID: id, closesConnection: true)
                return .failure(error, consumed: next, payloadToSkip: 0)
            }
            var counters: [ServerStats.Counter] = []
            var offset = next
            while offset < end {
                guard case .found(let contentEnd, let nextLine) = LineScanner.findLine(in: UnsafeRawBufferPointer(rebasing: bytes[..<end]), from: offset, maxLength: 256) else {
                    let error = ProtocolError(.malformed, "a FLEETSTATS line is over 256 bytes or does not end with a line break: \(usage)", requestID: id)
                    return .failure(error, consumed: end + breakLength, payloadToSkip: 0)
                }
                var fields = Tokenizer(bytes, from: offset, to: contentEnd)
                guard let nameRange = fields.next(), (1...Self.fleetCounterNameLimit).contains(nameRange.count),
                    bytes[nameRange].allSatisfy({ (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || $0 == UInt8(ascii: "_") }),
                    let value = fields.nextUnsigned(), fields.next() == nil, counters.count < Self.fleetCounterLimit
                else {
                    let error = ProtocolError(.malformed, "bad FLEETSTATS line \(LineScanner.quoted(bytes, offset..<contentEnd)): at most \(Self.fleetCounterLimit) lines of a name (a-z, 0-9, _) and a number", requestID: id)
                    return .failure(error, consumed: end + breakLength, payloadToSkip: 0)
                }
                counters.append(ServerStats.Counter(name: string(nameRange), value: value))
                offset = nextLine
            }
            return .request(Request(id: id, .fleetStats(ServerStats(counters: counters))), consumed: end + breakLength)
        }
        return nil
    }

    private func string(_ range: Range<Int>) -> String {
        String(decoding: UnsafeRawBufferPointer(rebasing: bytes[range]), as: UTF8.self)
    }
}
