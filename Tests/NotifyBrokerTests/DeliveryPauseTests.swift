import NIOCore
import Testing

@testable import NotifyBus
@testable import NotifyBroker
@testable import NotifyProtocol

/// `OPT pause` and `OPT resume` (protocol 2): how a client whose consumer fell behind holds its deliveries back at
/// the daemon while it still reads its replies.
@Suite("Paused deliveries (broker, no socket)", .timeLimit(.minutes(3)))
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

    @Test("a pause or a disconnect between two publishes of one batch holds or stops the second, though the first is already on its way")
    func changeWithinABatch() throws {
        let harness = OutboundQueueTests.harness(messages: 3)
        let subscriber = harness.connect()
        let leaving = harness.connect(uid: 1001)
        subscriber.send("SUB t\n")
        leaving.send("SUB t\n")
        _ = try subscriber.received()
        _ = try leaving.received()
        let publisher = harness.connect()
        // One batch: a delivery to each, then one pauses and the other goes, then a second delivery.
        publisher.handle("PUB t 1\nx\n")
        subscriber.handle("#1 OPT pause\n")
        harness.broker.close(leaving.session)
        publisher.handle("PUB t 1\ny\n")
        harness.broker.flush()
        #expect(Self.summary(try subscriber.received()) == ["t#1", "OK 1"], "the second waits while paused")
        #expect(subscriber.session.outbox.messageCount == 1)
        // Closed, it is written nothing more: its span of the batch went with its transport.
        #expect(try leaving.received().isEmpty)
        subscriber.send("#2 OPT resume\n")
        #expect(Self.summary(try subscriber.received()) == ["t#2", "OK 2"])
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

    @Test("SUB latest while paused: its buffered messages and its OK come at once, past the paused live deliveries")
    func subLatestWhilePaused() throws {
        let harness = OutboundQueueTests.harness(messages: 10)
        let publisher = harness.connect()
        publisher.send("PUB a.x 1\n1\nPUB a.y 1\n2\n")
        let client = harness.connect()
        client.send("SUB a.x\nOPT pause\n")
        _ = try client.received()
        publisher.send("PUB a.x 1\n3\n")
        client.send("#5 SUB a.> latest\n#6 PING\n")
        let frames = try client.received()
        let lasts = frames.prefix(2).compactMap { frame -> String? in
            if case .latest(5, let d) = frame { return "\(d.topic.name)#\(d.sequence)" }
            return nil
        }
        #expect(Set(lasts) == ["a.x#2", "a.y#1"], "asked for, the buffered messages flow: \(frames)")
        #expect(Self.summary(Array(frames.dropFirst(2))) == ["OK 5", "PONG"], "then the SUB's OK, then the PING's")
        client.send("OPT resume\n")
        #expect(Self.summary(try client.received()) == ["a.x#2", "OK -"], "the live delivery waited for the resume")
    }

    @Test("shutdown while paused sends what flowed past first, so a half-sent LAST frame is completed, not split")
    func shutdownWhilePaused() throws {
        let harness = OutboundQueueTests.harness(messages: 10)
        let client = harness.connect()
        client.send("SUB t\nOPT pause\n")
        _ = try client.received()
        harness.connect().send("PUB t 5\nfirst\n")
        client.transport.writesUntilFull = 1
        client.send("#1 LATEST t\n")
        client.transport.writesUntilFull = nil
        client.transport.isWritable = true
        harness.broker.shutdown()
        let frames = try client.received()
        guard frames.count == 3, case .latest(1, let last) = frames[0] else {
            Issue.record("expected LAST, MSG, ERR: \(frames)")
            return
        }
        #expect(last.text == "first")
        #expect(Self.summary([frames[1]]) == ["t#1"])
        #expect(errorCode(frames[2]) == .unavailable)
    }

    @Test("a latest-only subscriber paused with one old message at the front of its queue keeps its queue compact")
    func compactsBehindAStayingFront() throws {
        let harness = OutboundQueueTests.harness(messages: 100)
        let client = harness.connect()
        client.send("SUB x.* overflow=latest-only\nOPT pause\n")
        _ = try client.received()
        let publisher = harness.connect()
        publisher.send("PUB x.c 1\nc\n")
        for _ in 0..<20 { publisher.send(String(repeating: "PUB x.a 1\na\n", count: 1_000)) }
        #expect(client.session.outbox.messageCount == 2, "x.c and the newest x.a")
        #expect(client.session.outbox.entryCount <= 2 + 1_024 + 1, "20,000 replaced messages left no pile of tombstones")
        client.send("OPT resume\n")
        let frames = try client.received()
        #expect(Self.summary(frames).suffix(3) == ["x.c#1", "x.a#20000", "OK -"])
    }

    @Test("a reply queued while the socket was full goes out before the paused deliveries queued ahead of it")
    func repliesQueuedWhileUnwritable() throws {
        let harness = OutboundQueueTests.harness(messages: 10)
        let client = harness.connect()
        client.send("SUB t\nOPT pause\n")
        _ = try client.received()
        // Larger than a frame that joins the connection's span of the batch: the LAST is written on its own.
        let payload = String(repeating: "a", count: Broker.spanFrameLimit + 1)
        harness.connect().send("PUB t \(payload.utf8.count)\n\(payload)\n")
        #expect(client.session.outbox.messageCount == 1)
        // The LAST frame fills the socket, so the PONG after it waits in the queue, behind the paused delivery.
        client.transport.writesUntilFull = 1
        client.send("#1 LATEST t\n#2 PING\n")
        let answered = try client.received()
        guard answered.count == 1, case .latest(1, let last) = answered[0] else {
            Issue.record("expected the LAST alone, got \(answered)")
            return
        }
        #expect(last.text == payload)
        client.transport.writesUntilFull = nil
        OutboundQueueTests.resume(client)
        #expect(try client.received() == [.pong(requestID: 2)], "the PING waited for the socket, then passed the delivery too")
        #expect(client.session.outbox.messageCount == 1, "the delivery still waits")
        client.send("OPT resume\n")
        #expect(Self.summary(try client.received()) == ["t#1", "OK -"])
    }
}
