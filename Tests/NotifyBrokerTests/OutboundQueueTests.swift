import NIOCore
import Testing

@testable import NotifyBus
@testable import NotifyBroker
@testable import NotifyProtocol

@Suite("Slow subscribers (broker, no socket)", .timeLimit(.minutes(3)))
struct OutboundQueueTests {
    static func harness(messages: Int = 3, bytes: Int = 1 << 20) -> BrokerHarness {
        var configuration = BrokerConfiguration.default
        configuration.maxQueuedMessages = messages
        configuration.maxQueuedBytes = bytes
        return BrokerHarness(configuration: configuration)
    }

    /// Makes the subscriber's connection take frames again, as NIO would once it drained its buffer.
    static func resume(_ client: BrokerHarness.Client) {
        client.transport.isWritable = true
        client.harness.broker.writabilityChanged(client.session)
        client.harness.broker.flush()
    }

    static func summary(_ frames: [ServerFrame]) -> [String] {
        frames.map { frame in
            switch frame {
            case .delivery(let d): return "\(d.topic.name)#\(d.sequence)"
            case .dropped(let n): return "DROP \(n.topic.name) \(n.count) \(n.firstSequence)-\(n.lastSequence)"
            case .ok(let id, _): return "OK \(id.map(String.init) ?? "-")"
            case .pong: return "PONG"
            default: return "\(frame)"
            }
        }
    }

    @Test("while a connection takes nothing, its deliveries wait in order and its requests behind them, until it does")
    func queuesInOrder() throws {
        let harness = Self.harness(messages: 100)
        let subscriber = harness.connect()
        subscriber.send("SUB t\n")
        _ = try subscriber.received()
        subscriber.transport.isWritable = false
        let publisher = harness.connect()
        publisher.send("PUB t 1\na\n")
        subscriber.send("#1 PING\n")
        publisher.send("PUB t 1\nb\n")
        #expect(try subscriber.received().isEmpty, "nothing is written while the connection takes nothing")
        Self.resume(subscriber)
        #expect(Self.summary(try subscriber.received()) == ["t#1", "t#2", "PONG"])
    }

    @Test("drop-oldest: the oldest queued messages make room, and DROP says which, before the rest")
    func dropOldest() throws {
        let harness = Self.harness(messages: 3)
        let subscriber = harness.connect()
        subscriber.send("SUB t\n")
        _ = try subscriber.received()
        subscriber.transport.isWritable = false
        harness.connect().send(String(repeating: "PUB t 1\nx\n", count: 7))
        Self.resume(subscriber)
        #expect(Self.summary(try subscriber.received()) == ["DROP t 4 1-4", "t#5", "t#6", "t#7"])
        #expect(harness.broker.statistics.dropped == 4)
        #expect(harness.broker.statistics.messagesOut == 3)
        let client = harness.connect()
        client.send("TOPICS\n")
        guard case .topics(_, let infos) = try client.received().first else { Issue.record("no TOPICS"); return }
        #expect(infos.first?.dropped == 4 && infos.first?.delivered == 3)
    }

    @Test("latest-only: only the newest queued message of each topic is kept")
    func latestOnly() throws {
        let harness = Self.harness(messages: 100)
        let subscriber = harness.connect()
        subscriber.send("SUB g.* overflow=latest-only\n")
        _ = try subscriber.received()
        subscriber.transport.isWritable = false
        harness.connect().send("PUB g.a 1\n1\nPUB g.b 1\n1\nPUB g.a 1\n2\nPUB g.a 1\n3\nPUB g.b 1\n2\n")
        Self.resume(subscriber)
        #expect(Self.summary(try subscriber.received()) == ["DROP g.a 2 1-2", "DROP g.b 1 1-1", "g.a#3", "g.b#2"])
    }

    @Test("latest-only with every queued message of a different topic drops the oldest")
    func latestOnlyAtLimit() throws {
        let harness = Self.harness(messages: 2)
        let subscriber = harness.connect()
        subscriber.send("SUB g.* overflow=latest-only\n")
        _ = try subscriber.received()
        subscriber.transport.isWritable = false
        harness.connect().send("PUB g.a 1\n1\nPUB g.b 1\n1\nPUB g.c 1\n1\n")
        Self.resume(subscriber)
        #expect(Self.summary(try subscriber.received()) == ["DROP g.a 1 1-1", "g.b#1", "g.c#1"])
    }

    @Test("disconnect: a subscriber past its bounds is closed at once, and nobody else is affected")
    func disconnect() throws {
        let harness = Self.harness(messages: 2)
        var events: [String] = []
        harness.broker.onEvent = { if case .disconnectedSlowSubscriber(let peer, let queued) = $0 { events.append("\(peer.uid) \(queued)") } }
        let subscriber = harness.connect(uid: 7)
        let other = harness.connect()
        subscriber.send("SUB t overflow=disconnect\n")
        other.send("SUB t\n")
        _ = try subscriber.received()
        _ = try other.received()
        subscriber.transport.isWritable = false
        harness.connect().send(String(repeating: "PUB t 1\nx\n", count: 3))
        #expect(subscriber.transport.aborted)
        #expect(harness.broker.statistics.connections == 2)
        #expect(events == ["7 3"])
        #expect(try other.deliveries().count == 3)
    }

    @Test("when several of a connection's subscriptions match, the strictest policy applies")
    func strictestPolicy() throws {
        let harness = Self.harness(messages: 1)
        let subscriber = harness.connect()
        subscriber.send("SUB t.* overflow=latest-only\nSUB t.> overflow=disconnect\nSUB other\n")
        _ = try subscriber.received()
        subscriber.transport.isWritable = false
        harness.connect().send("PUB t.x 1\na\nPUB t.x 1\nb\n")
        #expect(subscriber.transport.aborted, "disconnect wins over latest-only")
    }

    @Test("a re-subscription changes the policy; replies are never dropped; the byte bound counts too")
    func bytesAndReplies() throws {
        let harness = Self.harness(messages: 1_000, bytes: 200)
        let subscriber = harness.connect()
        subscriber.send("SUB t overflow=disconnect\nSUB t\n")
        _ = try subscriber.received()
        subscriber.transport.isWritable = false
        let payload = String(repeating: "p", count: 50)
        harness.connect().send(String(repeating: "PUB t 50\n\(payload)\n", count: 5))
        subscriber.send(String(repeating: "PING\n", count: 20))
        #expect(!subscriber.transport.aborted, "the second SUB made it drop-oldest")
        Self.resume(subscriber)
        let summary = Self.summary(try subscriber.received())
        #expect(summary.filter { $0 == "PONG" }.count == 20, "every reply arrived")
        let delivered = summary.filter { $0.hasPrefix("t#") }.count
        #expect(delivered >= 1 && delivered < 5, "the byte bound dropped some")
        #expect(summary.first == "DROP t \(5 - delivered) 1-\(5 - delivered)")
    }

    @Test("frames over many chunks, one larger than a chunk, drained a few writes at a time while more come, arrive whole and in order")
    func chunksKeepFramesWhole() {
        var queue = OutboundQueue()
        let topic = TopicState(topic: Topic(unchecked: "t"))
        let transport = RecordingTransport()
        let limits = OutboundQueue.Limits(messages: .max, bytes: .max)
        var expected = ByteBuffer()
        var sequence: UInt64 = 0
        func append(_ count: Int) {
            for _ in 0..<count {
                sequence += 1
                // Sizes that do not divide a chunk, and one frame four chunks long.
                let size = sequence == 300 ? 4 * OutboundQueue.chunkSize : 7 + Int(sequence % 997)
                var frame = ByteBuffer()
                frame.writeString("\(sequence):")
                frame.writeRepeatingByte(UInt8(truncatingIfNeeded: sequence), count: size)
                expected.writeImmutableBuffer(frame)
                if sequence % 50 == 0 {
                    queue.appendReply(frame)
                } else {
                    let dropped = frame.withUnsafeReadableBytes {
                        queue.appendDelivery($0, topic: topic, sequence: sequence, payloadSize: size, policy: .dropOldest, limits: limits)
                    }
                    #expect(dropped == 0)
                }
            }
        }
        append(400)
        for round in 0..<40 {
            transport.isWritable = true
            transport.writesUntilFull = 1 + round % 4
            _ = queue.drain(into: transport)
            append(25)
        }
        transport.isWritable = true
        transport.writesUntilFull = nil
        _ = queue.drain(into: transport)
        var received = ByteBuffer()
        for frame in transport.written { received.writeImmutableBuffer(frame) }
        #expect(received == expected)
        #expect(queue.isEmpty && queue.messageCount == 0 && queue.byteCount == 0)
        #expect(transport.written.count < Int(sequence) / 4, "adjacent frames go out together")
    }

    /// A topic only a queue holds, to tell when the queue lets go of it.
    private final class QueuedTopic {
        weak var state: TopicState?
    }

    private static func enqueue(
        _ count: Int,
        of name: String,
        into queue: inout OutboundQueue,
        limits: OutboundQueue.Limits = .init(messages: .max, bytes: .max),
        isReplay: Bool = false
    ) -> QueuedTopic {
        let topic = TopicState(topic: Topic(unchecked: name))
        let queued = QueuedTopic()
        queued.state = topic
        let frame = ByteBuffer(string: "MSG \(name) 1 0 0 0 - 1\nx\n")
        for sequence in 1...count {
            _ = frame.withUnsafeReadableBytes {
                queue.appendDelivery(
                    $0,
                    topic: topic,
                    sequence: UInt64(sequence),
                    payloadSize: 1,
                    policy: .dropOldest,
                    limits: limits,
                    isReplay: isReplay
                )
            }
        }
        return queued
    }

    @Test("a queued delivery keeps its topic, and the queue lets go of it once it is written, dropped, taken out, flowed, or the queue goes")
    func holdsTopicsWhileQueued() {
        let transport = RecordingTransport()
        var queue = OutboundQueue()

        let written = Self.enqueue(3, of: "written", into: &queue)
        #expect(written.state != nil, "the queue holds the topic of what waits")
        _ = queue.drain(into: transport)
        #expect(written.state == nil && queue.isEmpty)

        let one = OutboundQueue.Limits(messages: 1, bytes: .max)
        let dropped = Self.enqueue(1, of: "dropped", into: &queue, limits: one)
        let kept = Self.enqueue(2, of: "kept", into: &queue, limits: one)
        #expect(dropped.state == nil, "a dropped delivery no longer holds its topic")
        #expect(kept.state?.dropped == 1 && queue.messageCount == 1)

        queue.removeDeliveries { $0.name == "kept" }
        #expect(kept.state == nil && queue.messageCount == 0)

        let flowed = Self.enqueue(2, of: "flowed", into: &queue, isReplay: true)
        let waiting = Self.enqueue(2, of: "waiting", into: &queue)
        _ = queue.drainFlowing(into: transport)
        #expect(flowed.state == nil, "a delivery that flowed out no longer holds its topic")
        #expect(waiting.state != nil && queue.messageCount == 2)

        queue = OutboundQueue()
        #expect(waiting.state == nil, "a queue let go of releases the topics of what still waited")
    }

    @Test("making room behind a reply that stays at the front looks at each entry about once, not at every tombstone again per delivery")
    func dropsBehindAStuckReplyInConstantWork() {
        var queue = OutboundQueue()
        // A reply first, which a connection that takes nothing keeps at the front: the tombstones of what is dropped
        // pile up behind it until there are enough to compact.
        queue.appendReply(ByteBuffer(string: "#1 OK\n"))
        let limits = OutboundQueue.Limits(messages: 100, bytes: .max)
        let deliveries = 20_000
        let stalled = Self.enqueue(deliveries, of: "stalled", into: &queue, limits: limits)
        #expect(queue.messageCount == 100 && stalled.state?.dropped == UInt64(deliveries - 100))
        // Each entry is passed over once as it becomes a tombstone, and again after each compaction (at most one
        // per 1,024 drops, over what is left); looking from the front every time cost about 500 per delivery here.
        #expect(queue.entriesScannedForOldest <= 3 * deliveries, "scanned \(queue.entriesScannedForOldest) entries for \(deliveries) deliveries")
    }

    @Test("a subscriber that stays stalled keeps exactly the newest messages its bound allows, however long it lasts")
    func longStall() throws {
        let harness = Self.harness(messages: 1_000)
        let subscriber = harness.connect()
        subscriber.send("SUB t\n")
        _ = try subscriber.received()
        subscriber.transport.isWritable = false
        let publisher = harness.connect()
        for _ in 0..<50 { publisher.send(String(repeating: "PUB t 3\nabc\n", count: 1_000)) }
        Self.resume(subscriber)
        let summary = Self.summary(try subscriber.received())
        #expect(summary.first == "DROP t 49000 1-49000")
        #expect(Array(summary.dropFirst()) == (49_001...50_000).map { "t#\($0)" })
    }
}
