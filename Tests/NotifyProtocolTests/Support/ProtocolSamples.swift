import NIOCore

@testable import NotifyProtocol
import TestSupport

/// Random but valid protocol values, for round-trip tests.
enum ProtocolSamples {
    static let tokens = ["a", "b", "backup", "nightly", "done", "x-1", "caf\u{E9}", "日本", "_", "0"]

    static func topic(_ random: inout SeededRandom) -> Topic {
        var parts = (0..<Int.random(in: 1...6, using: &random)).map { _ in tokens.randomElement(using: &random)! }
        if Int.random(in: 0..<10, using: &random) == 0 { parts[0] = "$notifyd" }
        return try! Topic(parts.joined(separator: "."))
    }

    static func pattern(_ random: inout SeededRandom) -> TopicPattern {
        var parts = (0..<Int.random(in: 1...5, using: &random)).map { _ in
            Int.random(in: 0..<4, using: &random) == 0 ? "*" : tokens.randomElement(using: &random)!
        }
        if Bool.random(using: &random) { parts[parts.count - 1] = ">" }
        return try! TopicPattern(parts.joined(separator: "."))
    }

    /// Mostly small payloads, full of the bytes that matter to framing (line breaks, spaces, NUL), sometimes large.
    static func payload(_ random: inout SeededRandom) -> ByteBuffer {
        let size: Int
        switch Int.random(in: 0..<20, using: &random) {
        case 0: size = 0
        case 1: size = Int.random(in: 1_000...70_000, using: &random)
        default: size = Int.random(in: 1...64, using: &random)
        }
        let interesting: [UInt8] = [0x0A, 0x0D, 0x20, 0x00, 0x23, 0xFF, UInt8(ascii: "P"), UInt8(ascii: "M")]
        var buffer = ByteBuffer()
        buffer.reserveCapacity(size)
        for _ in 0..<size {
            buffer.writeInteger(
                Bool.random(using: &random)
                    ? interesting.randomElement(using: &random)! : UInt8.random(in: 0...255, using: &random)
            )
        }
        return buffer
    }

    static func requestID(_ random: inout SeededRandom) -> UInt64? {
        switch Int.random(in: 0..<4, using: &random) {
        case 0: return nil
        case 1: return UInt64.max
        default: return UInt64.random(in: 0...1_000_000, using: &random)
        }
    }

    static func request(_ random: inout SeededRandom) -> Request {
        let command: Command
        switch Int.random(in: 0..<11, using: &random) {
        case 10:
            command = fleetRequest(&random)
        case 0, 1, 2:
            let options = PublishOptions(retain: Bool.random(using: &random), acknowledge: Bool.random(using: &random))
            command = .publish(topic(&random), payload: payload(&random), options)
        case 3:
            let options = SubscribeOptions(
                latestFirst: Bool.random(using: &random),
                overflow: OverflowPolicy.allCases.randomElement(using: &random)!
            )
            command = .subscribe(pattern(&random), options)
        case 4: command = .unsubscribe(pattern(&random))
        case 5: command = .latest(topic(&random))
        case 6: command = .clear(topic(&random))
        case 7: command = .topics(Bool.random(using: &random) ? pattern(&random) : nil, after: Bool.random(using: &random) ? topic(&random) : nil)
        case 8:
            switch Int.random(in: 0..<3, using: &random) {
            case 0: command = .stats
            case 1: command = .ping
            default: command = .explain(topic(&random), uid: Bool.random(using: &random) ? nil : UInt32.random(in: 0...UInt32.max, using: &random))
            }
        default:
            command = Bool.random(using: &random) ? .setEcho(Bool.random(using: &random)) : .setDeliveriesPaused(Bool.random(using: &random))
        }
        return Request(id: requestID(&random), command)
    }

    /// One of the fleet service's requests (protocol 5).
    static func fleetRequest(_ random: inout SeededRandom) -> Command {
        switch Int.random(in: 0..<4, using: &random) {
        case 0:
            return .follow((0..<Int.random(in: 1...4, using: &random)).map { _ in pattern(&random) })
        case 1:
            return .announceMissed(UInt64.random(in: 0...UInt64.max, using: &random))
        case 2:
            let counters = (0..<Int.random(in: 0...20, using: &random)).map { index in
                ServerStats.Counter(name: "nats_counter_\(index)", value: UInt64.random(in: 0...UInt64.max, using: &random))
            }
            return .fleetStats(ServerStats(counters: counters))
        default:
            var message = delivery(&random)
            message.publisher.host = ["web-01.example", "nats", "a"].randomElement(using: &random)!
            let kind = [FleetMessageKind.retained, .notRetained, .clear].randomElement(using: &random)!
            if kind == .clear { message.payload = ByteBuffer() }
            return .importMessage(FleetImport(delivery: message, kind: kind, replayed: kind != .notRetained && Bool.random(using: &random)))
        }
    }

    static func delivery(_ random: inout SeededRandom) -> Delivery {
        Delivery(
            topic: topic(&random),
            sequence: UInt64.random(in: 1...UInt64.max, using: &random),
            time: PublishTime(microsecondsSinceEpoch: UInt64.random(in: 0...4_102_444_800_000_000, using: &random)),
            publisher: Publisher(
                uid: UInt32.random(in: 0...UInt32.max, using: &random),
                pid: Int.random(in: 0..<8, using: &random) == 0 ? 0 : Int32.random(in: 1...Int32.max, using: &random),
                unit: Bool.random(using: &random) ? "backup@nightly.service" : nil,
                host: Int.random(in: 0..<3, using: &random) == 0 ? "web-01.example" : nil
            ),
            payload: payload(&random)
        )
    }

    static func serverFrame(_ random: inout SeededRandom) -> ServerFrame {
        switch Int.random(in: 0..<12, using: &random) {
        case 11:
            var exported = delivery(&random)
            exported.publisher.host = nil
            let kind = [FleetMessageKind.retained, .notRetained, .clear].randomElement(using: &random)!
            if kind == .clear { exported.payload = ByteBuffer() }
            return .export(FleetExport(delivery: exported, kind: kind))
        case 10:
            let first = UInt64.random(in: 1...UInt64.max / 2, using: &random)
            let last = first + UInt64.random(in: 0...1_000_000, using: &random)
            let notice = DropNotice(
                topic: topic(&random),
                count: UInt64.random(in: 1...(last - first + 1), using: &random),
                firstSequence: first,
                lastSequence: last,
                reason: [nil, DropReason.queue, .history, .forgotten, .fleet, DropReason(rawValue: "newer-one")].randomElement(using: &random)!
            )
            return .dropped(notice)
        case 9:
            let decisions = (0..<Int.random(in: 0...2, using: &random)).map { index in
                AccessExplanation.Decision(
                    access: index == 0 ? "publish" : "read",
                    isAllowed: Bool.random(using: &random),
                    rule: ["rule backup (line 3): allow publish backup.> group:34", "system topics are readable by everyone", ""]
                        .randomElement(using: &random)!
                )
            }
            return .explanation(requestID: requestID(&random), AccessExplanation(uid: UInt32.random(in: 0...UInt32.max, using: &random), decisions: decisions))
        case 0:
            let limits = ProtocolLimits(
                maxPayload: Int.random(in: 0...(1 << 30), using: &random),
                maxTopic: Int.random(in: 1...255, using: &random),
                maxLine: Int.random(in: 512...65_536, using: &random)
            )
            return .hello(ServerGreeting(limits: limits))
        case 1:
            return .ok(requestID: requestID(&random), value: Bool.random(using: &random) ? UInt64.random(in: 1...99, using: &random) : nil)
        case 2:
            return .pong(requestID: requestID(&random))
        case 3:
            let codes: [ErrorCode] = [.malformed, .unknownOperation, .invalidTopic, .payloadTooLarge, .notPermitted, .limitReached, .notFound, .unavailable]
            return .error(ProtocolError(codes.randomElement(using: &random)!, "something went wrong: try again", requestID: requestID(&random)))
        case 4, 5:
            return .delivery(delivery(&random))
        case 6:
            return .latest(requestID: requestID(&random), delivery(&random))
        case 7:
            let topics = (0..<Int.random(in: 0...20, using: &random)).map { _ in
                TopicInfo(
                    topic: topic(&random),
                    sequence: UInt64.random(in: 0...1_000, using: &random),
                    retainedBytes: Bool.random(using: &random) ? Int.random(in: 0...1_000_000, using: &random) : nil,
                    published: UInt64.random(in: 0...1_000, using: &random),
                    delivered: UInt64.random(in: 0...UInt64.max, using: &random),
                    lastPublished: Bool.random(using: &random) ? PublishTime(microsecondsSinceEpoch: 1_795_305_600_000_000) : nil,
                    dropped: Bool.random(using: &random) ? 0 : UInt64.random(in: 1...UInt64.max, using: &random)
                )
            }
            return .topics(requestID: requestID(&random), topics)
        default:
            let names = ["connections", "subscriptions", "topics", "messages_in", "bytes_out"]
            let counters = names.prefix(Int.random(in: 0...names.count, using: &random)).map {
                ServerStats.Counter(name: $0, value: UInt64.random(in: 0...UInt64.max, using: &random))
            }
            return .stats(requestID: requestID(&random), ServerStats(counters: counters))
        }
    }

    /// Cuts `bytes` into chunks at random points (some empty, many of one byte).
    static func chunks(of bytes: ByteBuffer, _ random: inout SeededRandom) -> [ByteBuffer] {
        var rest = bytes
        var result: [ByteBuffer] = []
        while rest.readableBytes > 0 {
            let size: Int
            switch Int.random(in: 0..<4, using: &random) {
            case 0: size = 0
            case 1: size = 1
            case 2: size = Int.random(in: 1...16, using: &random)
            default: size = Int.random(in: 1...4096, using: &random)
            }
            result.append(rest.readSlice(length: min(size, rest.readableBytes))!)
        }
        return result
    }
}

/// Feeds chunks to a decoder the way a channel would, and collects what comes out.
func decodeAll<Decoder: NIOSingleStepByteToMessageDecoder>(
    _ decoder: Decoder,
    chunks: [ByteBuffer],
    seenEOF: Bool = true
) throws -> (outputs: [Decoder.InboundOut], maxBuffered: Int) {
    let processor = NIOSingleStepByteToMessageProcessor(decoder)
    var outputs: [Decoder.InboundOut] = []
    var maxBuffered = 0
    for chunk in chunks {
        try processor.process(buffer: chunk) { outputs.append($0) }
        maxBuffered = max(maxBuffered, processor.unprocessedBytes)
    }
    try processor.finishProcessing(seenEOF: seenEOF) { outputs.append($0) }
    return (outputs, maxBuffered)
}
