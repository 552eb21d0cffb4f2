import NIOCore
import Testing

@testable import NotifyBus
@testable import NotifyBroker
@testable import NotifyProtocol

/// What a connection that keeps up costs the broker: no queue until a frame must wait.
@Suite("Idle sessions", .timeLimit(.minutes(3)))
struct IdleSessionTests {
    @Test("a subscriber that keeps up never gets a queue; one that falls behind does, and gives it back when it goes")
    func queueOnlyWhenNeeded() throws {
        let harness = BrokerHarness()
        let subscriber = harness.connect()
        subscriber.send("SUB t\n#1 PING\n")
        let publisher = harness.connect()
        publisher.send("PUB t 1\na\nPUB t 1\nb\n#2 LATEST t\n")
        #expect(try subscriber.deliveries() == ["a", "b"])
        #expect(!subscriber.session.hasOutboxStorage, "its deliveries and replies went straight out")
        #expect(!publisher.session.hasOutboxStorage)

        subscriber.transport.isWritable = false
        publisher.send("PUB t 1\nc\n")
        #expect(subscriber.session.hasOutboxStorage, "a delivery waits for the socket")
        #expect(subscriber.session.outbox.messageCount == 1)
        let account = subscriber.session.account
        #expect(account.queuedBytes > 0)

        harness.broker.close(subscriber.session)
        #expect(!subscriber.session.hasOutboxStorage, "let go with the session")
        #expect(account.queuedBytes == 0, "and counted off its uid")
    }

    @Test("a connection with one subscription holds no table for it; with more it does, and every way out counts them off")
    func oneSubscriptionInline() throws {
        let harness = BrokerHarness()
        let subscriber = harness.connect()
        subscriber.send("SUB a\n#1 PING\n")
        #expect(subscriber.session.subscriptionCount == 1)
        #expect(!subscriber.session.subscriptions.holdsDictionary, "one subscription is held inline")
        subscriber.send("SUB a\nSUB b.*\nSUB c\n#2 PING\n")
        #expect(subscriber.session.subscriptionCount == 3, "a second SUB to a is the same subscription")
        #expect(subscriber.session.subscriptions.holdsDictionary)
        subscriber.send("UNSUB a\nUNSUB b.*\nUNSUB a\n#3 PING\n")
        #expect(subscriber.session.subscriptionCount == 1)
        let errors = try subscriber.received().compactMap(errorCode)
        #expect(errors == [.notFound], "the second UNSUB a has nothing to remove")
        let publisher = harness.connect()
        publisher.send("PUB a 1\nx\nPUB c 1\ny\n")
        #expect(try subscriber.deliveries() == ["y"])
        #expect(harness.broker.statistics.subscriptions == 1)
        subscriber.send("UNSUB c\nSUB d\n#4 PING\n")
        #expect(!subscriber.session.subscriptions.holdsDictionary, "empty, then one again: inline")
        let account = subscriber.session.account
        harness.broker.close(subscriber.session)
        #expect(harness.broker.statistics.subscriptions == 0)
        #expect(account.subscriptions == 0)
    }

    @Test("the room a burst of connections and of messages made is let go when the daemon is idle")
    func burstRoomReleased() throws {
        var configuration = BrokerConfiguration.default
        configuration.history = .resumable
        let harness = BrokerHarness(configuration: configuration)
        let clients = (0..<1_000).map { _ in harness.connect() }
        clients[0].send(String(repeating: "PUB t 1\nx\n", count: 1_000))
        for client in clients.dropFirst() { harness.broker.close(client.session) }
        #expect(harness.broker.connections.open.count == 1)
        #expect(harness.broker.connections.open.capacity >= 1_000, "kept while the daemon works")
        #expect(harness.broker.pendingHistory.messages.capacity >= 1_000, "a batch of 1,000 messages made room for them")
        harness.broker.releaseIdleMemory()
        #expect(harness.broker.connections.open.capacity < 100)
        #expect(harness.broker.pendingHistory.messages.capacity == 0)
        clients[0].send("PUB t 1\ny\n#1 PING\n")
        #expect(try clients[0].received().contains { $0.requestID == 1 }, "and the daemon goes on")
    }

    @Test("a queue its subscriber caught up on is let go when the daemon is idle, and made again when needed")
    func drainedQueueReleased() throws {
        let harness = BrokerHarness()
        let subscriber = harness.connect()
        subscriber.send("SUB t\n")
        let publisher = harness.connect()
        subscriber.transport.isWritable = false
        publisher.send(String(repeating: "PUB t 1\nx\n", count: 1_000))
        #expect(subscriber.session.outbox.messageCount == 1_000)
        subscriber.transport.isWritable = true
        harness.broker.writabilityChanged(subscriber.session)
        harness.broker.flush()
        #expect(try subscriber.deliveries().count == 1_000)
        #expect(subscriber.session.hasOutboxStorage, "kept while the daemon works: it may fall behind again")

        // A connection whose queue still holds something keeps it.
        let behind = harness.connect()
        behind.send("SUB t\n")
        behind.transport.isWritable = false
        publisher.send("PUB t 1\ny\n")
        harness.broker.releaseIdleMemory()
        #expect(!subscriber.session.hasOutboxStorage, "idle: its room for 1,000 messages is given back")
        #expect(behind.session.outbox.messageCount == 1, "a queue with a message in it stays")
        #expect(try subscriber.deliveries() == ["y"])

        subscriber.transport.isWritable = false
        publisher.send("PUB t 1\nz\n")
        #expect(subscriber.session.outbox.messageCount == 1, "falling behind again makes a queue again")
        subscriber.transport.isWritable = true
        harness.broker.writabilityChanged(subscriber.session)
        harness.broker.flush()
        #expect(try subscriber.deliveries() == ["z"])
    }

    @Test("a connection closed, or a queue drained, with no request: the broker's activity moves, so the daemon trims")
    func activityWithoutRequests() throws {
        let harness = BrokerHarness()
        let subscriber = harness.connect()
        subscriber.send("SUB t\n")
        subscriber.transport.isWritable = false
        harness.connect().send("PUB t 1\nx\n")
        var activity = harness.broker.activity
        subscriber.transport.isWritable = true
        harness.broker.writabilityChanged(subscriber.session)
        harness.broker.flush()
        #expect(try subscriber.deliveries() == ["x"])
        #expect(harness.broker.activity != activity, "its queue drained")
        activity = harness.broker.activity
        harness.broker.close(subscriber.session)
        #expect(harness.broker.activity != activity, "it left")
        activity = harness.broker.activity
        harness.broker.releaseIdleMemory()
        #expect(harness.broker.activity == activity, "giving memory back is not activity, or the daemon would never rest")
    }
}
