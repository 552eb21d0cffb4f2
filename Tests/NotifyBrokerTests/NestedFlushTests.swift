import NIOCore
@testable import NotifyBroker
import Testing

@testable import NotifyBus
@testable import NotifyProtocol

/// A flush writes to connections, and a connection that takes its writes can become writable again in the middle of
/// it: the daemon then carries out that connection's held-back requests and flushes again, inside the first flush.
@Suite("Nested flush (no socket)", .timeLimit(.minutes(3)))
struct NestedFlushTests {
    @Test("deliveries made by a flush nested in another reach a subscriber the outer flush had not reached yet")
    func heldBackPublishDuringFlush() throws {
        let harness = BrokerHarness()
        let subscriber = harness.connect(uid: 1, pid: 10)
        subscriber.send("SUB t\n")
        let slow = harness.connect(uid: 2, pid: 20)
        slow.send("SUB u\n")
        let publisher = harness.connect(uid: 3, pid: 30)
        _ = try subscriber.received() + slow.received() + publisher.received()

        // The slow connection stops taking frames; the publish it sends meanwhile is held back.
        slow.transport.isWritable = false
        slow.send("PUB t 4\nheld\n")
        #expect(slow.session.heldBack.count == 1)

        // One batch marks the slow connection first, then the subscriber; flushing the slow one makes it writable,
        // and the daemon's handler carries out what it held back and flushes again (ChannelTransport does this).
        slow.transport.onFlush = { [unowned harness, unowned slow] in
            slow.transport.onFlush = nil
            slow.transport.isWritable = true
            harness.broker.writabilityChanged(slow.session)
            harness.broker.flush()
        }
        publisher.send("PUB u 5\nqueue\nPUB t 6\nbefore\n")

        #expect(try subscriber.deliveries() == ["before", "held"])
        #expect(try slow.deliveries() == ["queue"])
        harness.broker.flush()
        #expect(try subscriber.deliveries() == [], "nothing was left behind for a later flush")
    }
}
