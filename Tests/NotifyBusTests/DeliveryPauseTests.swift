import NIOCore
import Testing

@testable import NotifyBus

/// `OPT pause` and `OPT resume` (protocol 2): how a client whose consumer fell behind holds its deliveries back at
/// the daemon while it still reads its replies.
@Suite("Paused deliveries (broker, no socket)")
struct DeliveryPauseTests {
    static let summary = OutboundQueueTests.summary

    @Test("while paused, deliveries wait under their policy and replies pass them; resume sends DROP, the rest, then OK")
    func pauseQueuesDeliveriesButNotReplies() throws {
        let harness = OutboundQueueTests.harness(messages: 3)
        let subscriber = harness.connect()
        subscriber.send("SUB t\n#1 OPT pause\n")
        #expect(Self.summary(try subscriber.received()) == ["OK -", "OK 1"])
        harness.connect().send(String(repeating: "PUB t 1\nx\n", count: 5))
        subscriber.send("#2 PING\n#3 LATEST t\n")
        let replies = try subscriber.received()
        #expect(Self.summary(replies).first == "PONG", "the reply came, no delivery before it: \(Self.summary(replies))")
        guard replies.count == 2, case .latest(3, let last) = replies[1] else {
            Issue.record("expected PONG then LAST, got \(replies)")
            return
        }
        #expect(last.sequence == 5)
        #expect(subscriber.session.outbox.messageCount == 3, "the deliveries wait, within the queue's limit")

        subscriber.send("#4 OPT resume\n")
        #expect(Self.summary(try subscriber.received()) == ["DROP t 2 1-2", "t#3", "t#4", "t#5", "OK 4"])
        harness.connect().send("PUB t 1\ny\n")
        #expect(Self.summary(try subscriber.received()) == ["t#6"], "live again")
    }

    @Test("while paused, overflow=disconnect still disconnects and latest-only keeps each topic's newest")
    func pauseAppliesEachPolicy() throws {
        let harness = OutboundQueueTests.harness(messages: 2)
        let latestOnly = harness.connect()
        latestOnly.send("SUB t.* overflow=latest-only\nOPT pause\n")
        let strict = harness.connect()
        strict.send("SUB t.* overflow=disconnect\nOPT pause\n")
        _ = (try latestOnly.received(), try strict.received())
        harness.connect().send("PUB t.a 1\n1\nPUB t.b 1\n2\nPUB t.a 1\n3\n")
        #expect(strict.transport.aborted, "past its queue, a disconnect subscriber is closed, paused or not")
        latestOnly.send("OPT resume\n")
        #expect(Self.summary(try latestOnly.received()) == ["DROP t.a 1 1-1", "t.b#1", "t.a#2", "OK -"])
    }

    @Test("SUB latest while paused: its LAST frames wait as deliveries and its OK stays behind them; later replies pass")
    func subLatestWhilePaused() throws {
        let harness = OutboundQueueTests.harness(messages: 10)
        harness.connect().send("PUB a.x 1\n1\nPUB a.y 1\n2\n")
        let client = harness.connect()
        client.send("OPT pause\n#5 SUB a.> latest\n#6 PING\n")
        #expect(Self.summary(try client.received()) == ["OK -", "PONG"], "the SUB's OK waits with its buffered messages")
        client.send("OPT resume\n")
        let frames = try client.received()
        #expect(frames.count == 4)
        let lasts = frames.prefix(2).compactMap { frame -> String? in
            if case .latest(5, let d) = frame { return d.topic.name }
            return nil
        }
        #expect(Set(lasts) == ["a.x", "a.y"])
        #expect(Self.summary(Array(frames.suffix(2))) == ["OK 5", "OK -"])
    }

    @Test("a reply queued while the socket was full goes out before the paused deliveries queued ahead of it")
    func repliesQueuedWhileUnwritable() throws {
        let harness = OutboundQueueTests.harness(messages: 10)
        let client = harness.connect()
        client.send("SUB t\nOPT pause\n")
        _ = try client.received()
        harness.connect().send("PUB t 1\na\n")
        #expect(client.session.outbox.messageCount == 1)
        // A LATEST answers with two writes; the socket fills after the first, so the second waits in the queue,
        // behind the paused delivery.
        client.transport.writesUntilFull = 1
        client.send("#1 LATEST t\n#2 PING\n")
        #expect(try client.received().isEmpty, "half a LAST frame is no frame yet")
        client.transport.writesUntilFull = nil
        OutboundQueueTests.resume(client)
        let frames = try client.received()
        guard frames.count == 2, case .latest(1, let last) = frames[0] else {
            Issue.record("expected LAST then PONG, got \(frames)")
            return
        }
        #expect(last.text == "a")
        #expect(frames[1] == .pong(requestID: 2), "the PING waited for the socket, then passed the delivery too")
        #expect(client.session.outbox.messageCount == 1, "the delivery still waits")
        client.send("OPT resume\n")
        #expect(Self.summary(try client.received()) == ["t#1", "OK -"])
    }
}
