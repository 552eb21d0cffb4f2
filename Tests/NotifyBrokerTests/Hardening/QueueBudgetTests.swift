import NIOCore
import Testing

@testable import NotifyBus
@testable import NotifyBroker
@testable import NotifyProtocol

/// Issue 14, "Stalled subscribers multiply memory": what waits for one uid's connections, and for all, is bounded,
/// not only what waits for each connection.
@Suite("Queued bytes per user and in total (broker, no socket)", .timeLimit(.minutes(3)))
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

/// Issue 34, 9: what a resume replays and the replies a connection does not read count against the uid's budget of
/// queued bytes as deliveries do, so many connections of one uid cannot hold past it.
@Suite("Replays and replies within the uid's budget (broker, no socket)", .timeLimit(.minutes(3)))
struct ReplayBudgetTests {
    /// A daemon with `topics` topics of `messages` 100-byte messages each in their histories, published by uid 2000.
    static func withHistories(topics: Int, messages: Int, budget: Int) -> BrokerHarness {
        var configuration = ResumeTests.withHistory
        configuration.maxQueuedBytesPerUser = budget
        let harness = BrokerHarness(configuration: configuration)
        let payload = String(repeating: "x", count: 100)
        let publisher = harness.connect(uid: 2000)
        for topic in 0..<topics {
            publisher.send(String(repeating: "PUB t.\(topic) 100 noretain\n\(payload)\n", count: messages))
        }
        return harness
    }

    @Test("four connections of one uid resuming everything from history hold no more than its budget; what did not fit is announced")
    func replays() throws {
        let harness = Self.withHistories(topics: 50, messages: 10, budget: 20_000)
        let readers = (0..<4).map { _ in
            let reader = harness.connect(uid: 1000)
            // A peer that reads nothing: what is written stays in its write buffer, up to NIO's high-water mark.
            reader.transport.writeBufferLimit = harness.broker.configuration.writeBufferBytes
            return reader
        }
        for reader in readers { reader.handle("#1 SUB t.> since=1970-01-01T00:00:00Z\n") }
        harness.broker.flush()
        let held = harness.broker.connections.accounts[1000]!.queuedBytes
        // The budget, and the notices of what was dropped (replies, never dropped: one per topic and reader).
        #expect(held <= 20_000 + 4 * 50 * 60, "uid 1000 holds \(held) bytes for its four resumes (the budget is 20,000)")
        #expect(harness.broker.statistics.queuedBytes == held)

        // Each reader is told of every message: sent, or dropped with a notice.
        for reader in readers {
            reader.transport.takeBuffered()
            harness.broker.writeBufferChanged(reader.session)
            harness.broker.flush()
            var replayed = 0
            var dropped: UInt64 = 0
            for frame in try reader.received() {
                switch frame {
                case .latest: replayed += 1
                case .dropped(let notice), .missed(_, let notice): dropped += notice.count
                default: break
                }
            }
            #expect(UInt64(replayed) + dropped == 500, "\(replayed) replayed, \(dropped) announced dropped")
        }
    }

    @Test("a resume queued for its uid's budget, spent by the uid's other stalled connection, still reaches a connection that reads")
    func replayQueuedForTheBudget() throws {
        let harness = Self.withHistories(topics: 20, messages: 4, budget: 8_000)
        let stalled = try QueueBudgetTests.stalledSubscriber(harness, uid: 1000)
        // uid 2000 publishes to t: the stalled connection's queue takes the uid's budget.
        harness.connect(uid: 2000).send(String(repeating: "PUB t 100 noretain\n\(String(repeating: "y", count: 100))\n", count: 200))
        #expect(harness.broker.connections.accounts[1000]!.queuedBytes >= 7_000)
        let reader = harness.connect(uid: 1000)
        reader.send("#1 SUB t.> since=1970-01-01T00:00:00Z\n#2 PING\n")
        var replayed = 0
        var dropped: UInt64 = 0
        var answered = false
        for frame in try reader.received() {
            switch frame {
            case .latest: replayed += 1
            case .dropped(let notice), .missed(_, let notice): dropped += notice.count
            case .pong: answered = true
            default: break
            }
        }
        #expect(UInt64(replayed) + dropped == 80 && answered, "\(replayed) replayed, \(dropped) announced dropped, PONG: \(answered)")
        _ = stalled
    }

    @Test("publishes held back while the uid is over budget are carried out once the connection reads, into history whole")
    func heldBackPublishes() throws {
        let harness = Self.withHistories(topics: 1, messages: 1, budget: 10_000)
        let reader = harness.connect(uid: 1000)
        reader.transport.writeBufferLimit = harness.broker.configuration.writeBufferBytes
        reader.send(String(repeating: "PING\n", count: 5_000))
        #expect(harness.broker.connections.accounts[1000]!.queuedBytes >= 10_000)
        reader.send((1...20).map { "#\($0) PUB t.0 2 ack\nm\($0 % 10)\n" }.joined())
        #expect(reader.session.isHoldingBack)
        reader.transport.takeBuffered()
        harness.broker.writeBufferChanged(reader.session)
        harness.broker.flush()
        let oks = try reader.received().filter { if case .ok = $0 { true } else { false } }
        #expect(oks.count == 20, "\(oks.count) of 20 publishes acknowledged")
        let client = harness.connect(uid: 2000)
        client.send("HISTORY t.0\n")
        let kept = try client.received().compactMap { frame -> String? in
            if case .latest(_, let delivery) = frame { return "\(delivery.sequence) \(delivery.text ?? "")" }
            return nil
        }
        #expect(Array(kept.dropFirst()) == (2...21).map { "\($0) m\(($0 - 1) % 10)" }, "the history keeps them, whole and in order: \(kept)")
    }

    @Test("a connection that reads no replies gets no more requests carried out once its uid is over budget")
    func replies() throws {
        let harness = Self.withHistories(topics: 1, messages: 1, budget: 10_000)
        let reader = harness.connect(uid: 1000)
        reader.transport.writeBufferLimit = harness.broker.configuration.writeBufferBytes
        for _ in 0..<50 { reader.send(String(repeating: "PING\n", count: 100)) }
        let held = harness.broker.connections.accounts[1000]!.queuedBytes
        #expect(held <= 10_000 + 500, "uid 1000 holds \(held) bytes of PONGs it does not read (the budget is 10,000)")
        #expect(reader.session.isHoldingBack, "the rest wait, bounded by the unread-bytes budget")
        let answered = try reader.received().count
        // The peer reads what waits: the uid's budget is free again, and the requests held back are carried out.
        reader.transport.takeBuffered()
        harness.broker.writeBufferChanged(reader.session)
        harness.broker.flush()
        let more = try reader.received().count
        #expect(more > 0 && answered + more <= 5_000, "\(answered) PONGs, then \(more) more")
    }
}
