import NIOCore
import Testing

@testable import NotifyBus

/// Issue 14, "Stalled subscribers multiply memory": what waits for one uid's connections, and for all, is bounded,
/// not only what waits for each connection.
@Suite("Queued bytes per user and in total (broker, no socket)")
struct QueueBudgetTests {
    static func stalledSubscriber(_ harness: BrokerHarness, uid: UInt32) throws -> BrokerHarness.Client {
        let subscriber = harness.connect(uid: uid)
        subscriber.send("SUB t\n")
        _ = try subscriber.received()
        subscriber.transport.isWritable = false
        return subscriber
    }

    @Test("one uid's stalled connections share its budget; another uid's keep their own")
    func perUser() throws {
        var configuration = BrokerConfiguration.default
        configuration.maxQueuedBytesPerUser = 20_000
        let harness = BrokerHarness(configuration: configuration)
        let mine = try (0..<4).map { _ in try Self.stalledSubscriber(harness, uid: 1000) }
        let theirs = try Self.stalledSubscriber(harness, uid: 2000)
        let payload = String(repeating: "x", count: 100)
        harness.connect(uid: 3000).send(String(repeating: "PUB t 100 noretain\n\(payload)\n", count: 1_000))

        let queued = mine.map { $0.session.outbox.byteCount }.reduce(0, +)
        #expect(queued <= 20_000, "uid 1000's four queues hold \(queued) bytes together")
        #expect(theirs.session.outbox.byteCount <= 20_000)
        #expect(theirs.session.outbox.byteCount * 3 > queued, "uid 2000's one queue is not squeezed by uid 1000's four")
        #expect(harness.broker.statistics.queuedBytes == queued + theirs.session.outbox.byteCount)

        // What one queue drops is announced, and the counts add up when it reads again.
        OutboundQueueTests.resume(mine[0])
        let frames = try mine[0].received()
        let delivered = frames.compactMap(delivery).count
        let dropped = frames.reduce(0) { sum, frame in
            if case .dropped(let notice) = frame { return sum + Int(notice.count) }
            return sum
        }
        #expect(delivered + dropped == 1_000)

        for client in mine + [theirs] { harness.broker.close(client.session) }
        harness.broker.flush()
        #expect(harness.broker.statistics.queuedBytes == 0, "closed connections give their share back")
    }

    @Test("all stalled connections share the daemon's budget")
    func total() throws {
        var configuration = BrokerConfiguration.default
        configuration.maxQueuedBytesTotal = 30_000
        let harness = BrokerHarness(configuration: configuration)
        let stalled = try (0..<6).map { try Self.stalledSubscriber(harness, uid: 1000 + UInt32($0)) }
        let payload = String(repeating: "x", count: 100)
        harness.connect(uid: 3000).send(String(repeating: "PUB t 100 noretain\n\(payload)\n", count: 1_000))
        #expect(harness.broker.statistics.queuedBytes <= 30_000)
        #expect(stalled.map { $0.session.outbox.byteCount }.reduce(0, +) == harness.broker.statistics.queuedBytes)
    }

    @Test("what waits in connections' write buffers counts against the budget too, and is counted off once taken")
    func writeBuffers() throws {
        var configuration = BrokerConfiguration.default
        configuration.maxQueuedBytes = 1 << 20  // half of it, 512 KiB, in each connection's write buffer
        configuration.maxQueuedBytesPerUser = 100_000
        let harness = BrokerHarness(configuration: configuration)
        let mine = try (0..<4).map { _ in
            let subscriber = harness.connect(uid: 1000)
            subscriber.send("SUB t\n")
            _ = try subscriber.received()
            subscriber.transport.writeBufferLimit = configuration.writeBufferBytes
            return subscriber
        }
        let payload = String(repeating: "x", count: 1_000)
        let publisher = harness.connect(uid: 3000)
        for _ in 0..<100 { publisher.send(String(repeating: "PUB t 1000 noretain\n\(payload)\n", count: 10)) }

        let buffered = mine.map(\.transport.bufferedBytes).reduce(0, +)
        let queued = mine.map { $0.session.outbox.byteCount }.reduce(0, +)
        // Each connection may take one batch (10 messages here) past the budget before the flush that counts it.
        #expect(buffered + queued <= 100_000 + 4 * 10 * 1_100, "uid 1000's four connections hold \(buffered) + \(queued) bytes")
        #expect(harness.broker.statistics.queuedBytes == buffered + queued)

        // The peer reads: what its write buffer held is counted off, and what waited in its queue goes out, after
        // the notice of what was dropped.
        mine[0].transport.takeBuffered()
        harness.broker.writeBufferChanged(mine[0].session)
        harness.broker.flush()
        let frames = try mine[0].received()
        let delivered = frames.compactMap(delivery).count
        let dropped = frames.reduce(0) { sum, frame in
            if case .dropped(let notice) = frame { return sum + Int(notice.count) }
            return sum
        }
        #expect(delivered + dropped == 1_000 && dropped > 0, "\(delivered) delivered, \(dropped) dropped")

        for client in mine { harness.broker.close(client.session) }
        harness.broker.flush()
        #expect(harness.broker.statistics.queuedBytes == 0, "closed connections give their share back")
    }
}
