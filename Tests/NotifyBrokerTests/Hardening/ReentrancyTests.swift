import NIOCore
import Testing

@testable import NotifyBus
@testable import NotifyBroker
@testable import NotifyProtocol

/// Issue 14, "Crash": no broker work runs inside a fan-out. A subscriber disconnected for falling behind is closed
/// at the end of the batch, so the publishes it had held back are carried out then, not inside the publish that
/// disconnected it.
@Suite("Re-entrancy (broker, no socket)", .timeLimit(.minutes(3)))
struct ReentrancyTests {
    @Test("a disconnected subscriber's held-back PUBs run after the fan-out that closed it, not inside it")
    func heldBackPublishOfADisconnectedSubscriber() throws {
        var configuration = BrokerConfiguration.default
        configuration.maxQueuedMessages = 2
        let harness = BrokerHarness(configuration: configuration)
        let watcher = harness.connect()
        watcher.send("SUB *\n")
        _ = try watcher.received()
        let slow = harness.connect()
        slow.send("SUB t overflow=disconnect\n")
        _ = try slow.received()
        // Its socket is full: what it sends now is held back, a publish among it.
        slow.transport.isWritable = false
        slow.send("PUB u 4\nheld\n")
        #expect(slow.session.isHoldingBack)
        // As the daemon's channel does: an abort closes the channel at once, and its handler closes the session
        // and flushes, from wherever the abort was called.
        slow.transport.onAbort = { [unowned harness] in
            harness.broker.close(slow.session)
            harness.broker.flush()
        }
        let publisher = harness.connect()
        publisher.send((1...6).map { "PUB t 2\nm\($0)\n" }.joined())
        #expect(slow.transport.aborted)
        #expect(
            try watcher.deliveries() == ["m1", "m2", "m3", "m4", "m5", "m6", "held"],
            "the fan-out completed whole, then the held-back publish went out"
        )
        publisher.send("PUB t 2\nm7\n")
        #expect(try watcher.deliveries() == ["m7"])
    }
}
