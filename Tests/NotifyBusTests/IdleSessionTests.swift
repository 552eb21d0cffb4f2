import NIOCore
import Testing

@testable import NotifyBus

/// What a connection that keeps up costs the broker: no queue until a frame must wait.
@Suite("Idle sessions")
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
}
