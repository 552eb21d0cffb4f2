import NIOCore
import Testing

@testable import NotifyProtocol
import TestSupport

/// What the decoder should produce for one frame: a request, or an error with its code.
enum Expected: Equatable, CustomStringConvertible {
    case request(Command, id: UInt64? = nil)
    case error(ErrorCode, id: UInt64? = nil, closes: Bool = false)

    var description: String {
        switch self {
        case .request(let command, let id): return "request \(command) id \(String(describing: id))"
        case .error(let code, let id, let closes): return "ERR \(code) id \(String(describing: id)) closes \(closes)"
        }
    }

    func matches(_ decoded: DecodedRequest) -> Bool {
        switch (self, decoded) {
        case (.request(let command, let id), .request(let request)):
            return request.command == command && request.id == id
        case (.error(let code, let id, let closes), .failure(let error)):
            return error.code == code && error.requestID == id && error.closesConnection == closes
        default:
            return false
        }
    }
}

struct MalformedCase: CustomTestStringConvertible, Sendable {
    let name: String
    let input: [UInt8]
    let expected: [Expected]
    var testDescription: String { name }

    init(_ name: String, _ input: String, _ expected: [Expected]) {
        self.init(name, Array(input.utf8), expected)
    }

    init(_ name: String, _ input: [UInt8], _ expected: [Expected]) {
        self.name = name
        self.input = input
        self.expected = expected
    }
}


private let ping = Expected.request(.ping)
private func topic(_ name: String) -> Topic { try! Topic(name) }

@Suite("Malformed input", .timeLimit(.minutes(3)))
struct MalformedInputTests {
    static let limits = ProtocolLimits(maxPayload: 1000, maxTopic: 255, maxLine: 1024)

    /// Every documented error, and the well-formed edge cases right next to them. Most cases end with a PING to
    /// show that the decoder found the next frame where the client put it.
    static let corpus: [MalformedCase] = [
        // Syntax
        .init("unknown verb", "FOO bar\nPING\n", [.error(.unknownOperation), ping]),
        .init("unknown verb keeps its id", "#5 FOO\nPING\n", [.error(.unknownOperation, id: 5), ping]),
        .init("PUB without arguments", "PUB\nPING\n", [.error(.malformed), ping]),
        .init("PUB without size", "PUB a.b\nPING\n", [.error(.malformed), ping]),
        .init("PUB with a size that is not a number", "PUB a.b 1x\nPING\n", [.error(.malformed), ping]),
        .init("PUB with a negative size", "PUB a.b -1\nPING\n", [.error(.malformed), ping]),
        .init("PUB with a 21-digit size", "PUB a.b 100000000000000000000\nPING\n", [.error(.malformed), ping]),
        .init("PUB with an unknown option skips its payload", "PUB a.b 3 bogus\nabc\nPING\n", [.error(.malformed), ping]),
        .init("id that is not a number", "#x PING\nPING\n", [.error(.malformed), ping]),
        .init("id over 64 bits", "#18446744073709551616 PING\nPING\n", [.error(.malformed), ping]),
        .init("id without an operation", "#5\nPING\n", [.error(.malformed, id: 5), ping]),
        .init("SUB without a pattern", "SUB\nPING\n", [.error(.malformed), ping]),
        .init("SUB with an unknown option", "SUB a.b first\nPING\n", [.error(.malformed), ping]),
        .init("UNSUB without a pattern", "UNSUB\nPING\n", [.error(.malformed), ping]),
        .init("LATEST with two topics", "LATEST a b\nPING\n", [.error(.malformed), ping]),
        .init("CLEAR without a topic", "CLEAR\nPING\n", [.error(.malformed), ping]),
        .init("TOPICS with two patterns", "TOPICS a b\nPING\n", [.error(.malformed), ping]),
        .init("STATS with an argument", "STATS now\nPING\n", [.error(.malformed), ping]),
        .init("PING with an argument", "#1 PING x\nPING\n", [.error(.malformed, id: 1), ping]),
        .init("OPT without an option", "OPT\nPING\n", [.error(.malformed), ping]),
        .init("OPT with an unknown option", "OPT loud\nPING\n", [.error(.malformed), ping]),
        .init("SUB with an unknown overflow policy", "SUB a.b overflow=bogus\nPING\n", [.error(.malformed), ping]),
        .init("SUB with an empty overflow policy", "SUB a.b overflow=\nPING\n", [.error(.malformed), ping]),
        .init("UNSUB with two patterns", "UNSUB a b\nPING\n", [.error(.malformed), ping]),
        .init("EXPLAIN without a topic", "#3 EXPLAIN\nPING\n", [.error(.malformed, id: 3), ping]),
        .init("EXPLAIN with a uid that is not a number", "EXPLAIN a.b root\nPING\n", [.error(.malformed), ping]),
        .init("EXPLAIN with a uid over 32 bits", "EXPLAIN a.b 4294967296\nPING\n", [.error(.malformed), ping]),
        .init("EXPLAIN with an extra argument", "EXPLAIN a.b 0 x\nPING\n", [.error(.malformed), ping]),
        .init("EXPLAIN of a pattern", "EXPLAIN a.*\nPING\n", [.error(.invalidTopic), ping]),

        // Topics
        .init("PUB to an empty token skips the payload", "PUB a..b 3\nabc\nPING\n", [.error(.invalidTopic), ping]),
        .init("PUB to a wildcard", "#2 PUB a.* 1\nx\nPING\n", [.error(.invalidTopic, id: 2), ping]),
        .init("PUB to a 256-byte topic", "PUB \(String(repeating: "t", count: 256)) 1\nx\nPING\n", [.error(.invalidTopic), ping]),
        .init("PUB to invalid UTF-8", [UInt8]("PUB a.".utf8) + [0xC3, 0x28] + Array(" 1\nx\nPING\n".utf8), [.error(.invalidTopic), ping]),
        .init("PUB to a topic with a control character", [UInt8]("PUB a".utf8) + [0x01] + Array(" 1\nx\nPING\n".utf8), [.error(.invalidTopic), ping]),
        .init("SUB to a misplaced >", "SUB a.>.b\nPING\n", [.error(.invalidTopic), ping]),
        .init("SUB to a wildcard inside a token", "SUB a*\nPING\n", [.error(.invalidTopic), ping]),
        .init("LATEST of a pattern", "LATEST a.>\nPING\n", [.error(.invalidTopic), ping]),
        .init("CLEAR of a pattern", "CLEAR *\nPING\n", [.error(.invalidTopic), ping]),

        // Sizes
        .init("payload over max_payload is skipped", "PUB a.b 1001\n" + String(repeating: "z", count: 1001) + "\nPING\n", [.error(.payloadTooLarge), ping]),
        .init("a 20-digit size past 64 bits is too large, not malformed", "#6 PUB a.b 99999999999999999999\n",
              [.error(.payloadTooLarge, id: 6)]),
        .init("the largest 64-bit size is too large", "PUB a.b 18446744073709551615\n", [.error(.payloadTooLarge)]),
        .init("payload at max_payload is accepted", "PUB a.b 1000\n" + String(repeating: "z", count: 1000) + "\n",
              [.request(.publish(topic("a.b"), payload: ByteBuffer(repeating: UInt8(ascii: "z"), count: 1000), PublishOptions()))]),
        .init("line over max_line closes", String(repeating: "A", count: 1030) + "\nPING\n", [.error(.malformed, closes: true)]),
        .init("payload longer than declared closes", "PUB a.b 2\nabc\nPING\n", [.error(.malformed, closes: true)]),
        .init("payload cut short by a lying size closes", "PUB a.b 5\nab\nPING\n", [.error(.malformed, closes: true)]),

        // Well-formed edge cases
        .init("empty payload", "PUB a.b 0\n\n", [.request(.publish(topic("a.b"), payload: ByteBuffer(), PublishOptions()))]),
        .init("payload with line breaks", "PUB a.b 4\n\n\r\n\n\n",
              [.request(.publish(topic("a.b"), payload: ByteBuffer(string: "\n\r\n\n"), PublishOptions()))]),
        .init("CRLF line breaks", "PUB a.b 1 ack noretain\r\nx\r\nPING\r\n",
              [.request(.publish(topic("a.b"), payload: ByteBuffer(string: "x"), PublishOptions(retain: false, acknowledge: true))), ping]),
        .init("lower-case verbs and options", "#9 pub a.b 1 ACK\nx\nsub a.> LATEST\nopt NoEcho\n", [
            .request(.publish(topic("a.b"), payload: ByteBuffer(string: "x"), PublishOptions(acknowledge: true)), id: 9),
            .request(.subscribe(try! TopicPattern("a.>"), SubscribeOptions(latestFirst: true))),
            .request(.setEcho(false)),
        ]),
        .init("OPT pause and resume (protocol 2)", "OPT pause\n#4 opt RESUME\n", [
            .request(.setDeliveriesPaused(true)),
            .request(.setDeliveriesPaused(false), id: 4),
        ]),
        .init("blank lines and extra blanks are ignored", "\n\r\n   \n \t PING  \n", [ping]),
        .init("largest id", "#18446744073709551615 PING\n", [.request(.ping, id: UInt64.max)]),
        .init("TOPICS without a pattern", "TOPICS\n", [.request(.topics(nil))]),
        .init("TOPICS pages (protocol 2)", "TOPICS a.> AFTER=a.b\nTOPICS after=z\n", [
            .request(.topics(try! TopicPattern("a.>"), after: topic("a.b"))),
            .request(.topics(nil, after: topic("z"))),
        ]),
        .init("TOPICS with two patterns", "TOPICS a b\nPING\n", [.error(.malformed), ping]),
        .init("TOPICS after a wildcard", "TOPICS after=a.*\nPING\n", [.error(.invalidTopic), ping]),
        .init("SUB with every option, in any case", "SUB a.* Overflow=Latest-Only LATEST\n",
              [.request(.subscribe(try! TopicPattern("a.*"), SubscribeOptions(latestFirst: true, overflow: .latestOnly)))]),
        .init("EXPLAIN with the largest uid", "EXPLAIN a.b 4294967295\n", [.request(.explain(topic("a.b"), uid: UInt32.max))]),
        .init("reserved topics are valid names (permission is the broker's business)", "LATEST $notifyd.x\n",
              [.request(.latest(topic("$notifyd.x")))]),
    ]

    @Test("a topic longer than the configured max_topic is refused, one at it accepted, and the payload skipped")
    func configuredTopicLength() throws {
        let limits = ProtocolLimits(maxPayload: 1000, maxTopic: 8, maxLine: 1024)
        let input = ByteBuffer(string: "PUB abcd.efg 1\nx\nPUB abcd.efgh 1\nx\nSUB abcd.>.x\nPING\n")
        let (outputs, _) = try decodeAll(RequestDecoder(limits: limits), chunks: [input])
        guard outputs.count == 4, case .request(let first) = outputs[0], case .failure(let tooLong) = outputs[1],
            case .failure(let patternTooLong) = outputs[2], case .request(let ping) = outputs[3]
        else {
            Issue.record("unexpected \(outputs)")
            return
        }
        #expect(first.command == .publish(topic("abcd.efg"), payload: ByteBuffer(string: "x"), PublishOptions()))
        #expect(tooLong.code == .invalidTopic && tooLong.message.contains("8"))
        #expect(patternTooLong.code == .invalidTopic)
        #expect(ping.command == .ping)
    }

    @Test("each malformed input yields its documented error, and reading resumes at the next frame", arguments: corpus)
    func corpusCase(_ sample: MalformedCase) throws {
        for chunking in ["whole", "bytes"] {
            var input = ByteBuffer(bytes: sample.input)
            let chunks: [ByteBuffer]
            if chunking == "whole" {
                chunks = [input]
            } else {
                var parts: [ByteBuffer] = []
                while let byte = input.readSlice(length: 1) { parts.append(byte) }
                chunks = parts
            }
            let (outputs, _) = try decodeAll(RequestDecoder(limits: Self.limits), chunks: chunks)
            #expect(outputs.count == sample.expected.count, "\(chunking): \(outputs)")
            for (output, expected) in zip(outputs, sample.expected) {
                #expect(expected.matches(output), "\(chunking): expected \(expected), got \(output)")
                if case .failure(let error) = output {
                    #expect(!error.message.isEmpty && !error.message.contains("\n"))
                }
            }
        }
    }

    @Test("an oversized payload is refused on its line, before any of it arrives, and never buffered")
    func oversizedIsNotBuffered() throws {
        let processor = NIOSingleStepByteToMessageProcessor(RequestDecoder(limits: Self.limits))
        var outputs: [DecodedRequest] = []
        try processor.process(buffer: ByteBuffer(string: "#4 PUB a.b 2147483648\n")) { outputs.append($0) }
        #expect(outputs.count == 1)
        if case .failure(let error) = outputs.first {
            #expect(error.code == .payloadTooLarge && error.requestID == 4 && !error.closesConnection)
        } else {
            Issue.record("expected too-large, got \(outputs)")
        }
        // Stream 64 MiB of the 2 GiB: the decoder discards it as it comes.
        let chunk = ByteBuffer(repeating: 0x41, count: 1 << 20)
        for _ in 0..<64 {
            try processor.process(buffer: chunk) { outputs.append($0) }
            #expect(processor.unprocessedBytes == 0)
        }
        #expect(outputs.count == 1)
    }

    @Test("a long line is refused as soon as it is over the limit, without waiting for its end")
    func longLineRefusedEarly() throws {
        let processor = NIOSingleStepByteToMessageProcessor(RequestDecoder(limits: Self.limits))
        var outputs: [DecodedRequest] = []
        for _ in 0..<1_000 {
            try processor.process(buffer: ByteBuffer(repeating: 0x41, count: 100)) { outputs.append($0) }
            #expect(processor.unprocessedBytes <= Self.limits.maxLine + 2)
        }
        #expect(outputs.count == 1)
        #expect(outputs.first.map { if case .failure(let e) = $0 { e.closesConnection } else { false } } == true)
    }

    @Test("random junk never crashes, hangs, or makes the decoder hold more than a frame")
    func junk() throws {
        var random = SeededRandom(seed: SeededRandom.seed(default: 99))
        let fragments = ["PUB ", "SUB ", "#", "1", "99999", " ", "\n", "\r", "a.b", "*", ">", "..", "ack", "noretain",
                         "PING", "LATEST ", "OPT ", "\0", "\u{FF}", "2147483648", "0"]
        for _ in 0..<400 {
            var wire = ByteBuffer()
            for _ in 0..<Int.random(in: 1...200, using: &random) {
                if Bool.random(using: &random) {
                    wire.writeString(fragments.randomElement(using: &random)!)
                } else {
                    wire.writeInteger(UInt8.random(in: 0...255, using: &random))
                }
            }
            let chunks = ProtocolSamples.chunks(of: wire, &random)
            let (outputs, maxBuffered) = try decodeAll(RequestDecoder(limits: Self.limits), chunks: chunks)
            #expect(maxBuffered <= Self.limits.maxLine + 2 + Self.limits.maxPayload + 2 + 4096)
            #expect(outputs.count <= wire.readableBytes)
        }
    }

    @Test("the client's decoder rejects a server that breaks the protocol")
    func malformedServer() throws {
        for input in ["MSG a.b 1 2 3 4 - x\n", "MSG a..b 1 2 3 4 - 1\nx\n", "OK x\n", "TOPICS x\n", "MSG a 1 2 3 4 - 1\nxy\n",
                      "STATS 1\nconnections\n", "ERR\n", "HELLO notifyd\n"] {
            #expect(throws: ServerFrameDecoder.Malformed.self, "\(input)") {
                try decodeAll(ServerFrameDecoder(), chunks: [ByteBuffer(string: input)])
            }
        }
        #expect(throws: ServerFrameDecoder.Truncated(bytesLeft: 20)) {
            try decodeAll(ServerFrameDecoder(), chunks: [ByteBuffer(string: "MSG a 1 2 3 4 - 5\nab")])
        }
        // Unknown payload-less frames from a newer server are skipped.
        let (frames, _) = try decodeAll(ServerFrameDecoder(), chunks: [ByteBuffer(string: "NEWS 1 2 3\nPONG\n")])
        #expect(frames == [.pong(requestID: nil)])
    }
}
