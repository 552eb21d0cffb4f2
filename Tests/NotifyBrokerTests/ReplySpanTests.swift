import NIOCore
import Testing

@testable import NotifyBus
@testable import NotifyBroker
@testable import NotifyProtocol

/// Replies and replayed messages join their connection's span of the batch, as deliveries do: NIO keeps about 50
/// bytes per pending write in a ring that never shrinks, so a run of small frames must be one write, not one each.
@Suite("Replies in the connection's span", .timeLimit(.minutes(3)))
struct ReplySpanTests {
    /// A connection past its greeting, and the writes its transport had taken by then.
    static func connect(to harness: BrokerHarness) throws -> (BrokerHarness.Client, writesBefore: Int) {
        let client = harness.connect()
        _ = try client.received()
        return (client, client.transport.written.count)
    }

    @Test("a thousand pipelined PINGs are answered in order, in one write")
    func pipelinedPings() throws {
        let harness = BrokerHarness()
        let (client, writesBefore) = try Self.connect(to: harness)
        client.send((1...1_000).map { "#\($0) PING\n" }.joined())
        #expect(try client.received() == (1...1_000).map { .pong(requestID: UInt64($0)) })
        #expect(client.transport.written.count - writesBefore == 1)
    }

    @Test("replies, deliveries and replayed messages to one connection keep their order in one write")
    func mixedOrder() throws {
        let harness = BrokerHarness()
        harness.connect().send("PUB old 3\nold\n")
        let (client, writesBefore) = try Self.connect(to: harness)
        client.send("#1 PING\n#2 SUB t\nPUB t 1\na\n#3 SUB old latest\n#4 LATEST t\nPUB t 1\nb\n#5 PING\n")
        let frames = try client.received()
        #expect(frames.count == 8, "\(frames)")
        guard frames.count == 8 else { return }
        #expect(frames[0] == .pong(requestID: 1))
        #expect(frames[1].requestID == 2)
        #expect(delivery(frames[2])?.text == "a")
        guard case .latest(3, let old) = frames[3] else {
            Issue.record("expected the buffered message SUB … latest brings, got \(frames[3])")
            return
        }
        #expect(old.text == "old")
        #expect(frames[4].requestID == 3)
        guard case .latest(4, let last) = frames[5] else {
            Issue.record("expected LAST 4, got \(frames[5])")
            return
        }
        #expect(last.text == "a")
        #expect(delivery(frames[6])?.text == "b")
        #expect(frames[7] == .pong(requestID: 5))
        #expect(client.transport.written.count - writesBefore == 1)
    }

    @Test("a frame larger than a span takes is written on its own, after what came before it and before what follows")
    func largeFrameAlone() throws {
        let harness = BrokerHarness()
        let payload = String(repeating: "x", count: Broker.spanFrameLimit + 1)
        harness.connect().send("PUB big \(payload.utf8.count)\n\(payload)\n")
        let (client, writesBefore) = try Self.connect(to: harness)
        client.send("#1 PING\n#2 LATEST big\n#3 PING\n#4 PING\n")
        let frames = try client.received()
        guard frames.count == 4, case .latest(2, let last) = frames[1] else {
            Issue.record("expected PONG, LAST, PONG, PONG: \(frames)")
            return
        }
        #expect(frames[0] == .pong(requestID: 1))
        #expect(last.text == payload)
        #expect(Array(frames[2...]) == [.pong(requestID: 3), .pong(requestID: 4)])
        #expect(client.transport.written.count - writesBefore == 3, "the PONG before, the LAST, the PONGs after")
    }

    @Test("a small reply when the batch is full is written on its own, after the span before it")
    func batchFull() throws {
        let harness = BrokerHarness()
        let (client, writesBefore) = try Self.connect(to: harness)
        client.handle("#1 PING\n")
        // Others' deliveries took the rest of the batch.
        _ = harness.broker.batch.append { $0.writeRepeatingByte(0, count: $0.writableBytes) }
        client.send("#2 PING\n#3 PING\n")
        #expect(try client.received() == [.pong(requestID: 1), .pong(requestID: 2), .pong(requestID: 3)])
        #expect(client.transport.written.count - writesBefore == 3, "the span with PONG 1, then each on its own")
    }

    @Test("a span of replies outlives a publish that starts the batch over: written first, none lost")
    func batchRestartedAfterReplies() throws {
        let harness = BrokerHarness()
        let client = harness.connect()
        client.send("SUB t\n")
        _ = try client.received()
        let payload = String(repeating: "p", count: 63 << 10)
        client.send("#1 PING\nPUB t 1\na\nPUB t \(payload.utf8.count)\n\(payload)\n#2 PING\n")
        let frames = try client.received()
        guard frames.count == 4 else {
            Issue.record("expected PONG, MSG, MSG, PONG: \(frames.count) frames")
            return
        }
        #expect(frames[0] == .pong(requestID: 1))
        #expect(delivery(frames[1])?.text == "a")
        #expect(delivery(frames[2])?.text == payload)
        #expect(frames[3] == .pong(requestID: 2))
    }
}
