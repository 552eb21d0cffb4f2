internal import DequeModule
import NIOCore

/// A connection's frames waiting for its socket.
///
/// It is used only while the socket cannot take more (NIO's write buffer is over its high-water mark), so a
/// subscriber that keeps up never touches it. For one that falls behind it is bounded: a delivery that would take
/// it past ``Limits`` makes room by the policy of the subscription it came through (see ``OverflowPolicy``), and
/// every message dropped is remembered per topic, to be announced with `DROP` before anything else is sent.
/// Replies are never dropped; the daemon stops reading a connection that does not read its replies.
///
/// Owned by the broker's thread, like its session.
struct OutboundQueue {
    /// The most a queue may hold before it drops (or disconnects).
    struct Limits: Sendable, Hashable {
        /// Deliveries waiting.
        var messages: Int
        /// Bytes of the frames waiting.
        var bytes: Int
    }

    private final class Entry {
        let frame: ByteBuffer
        /// The topic of a delivery; nil for a reply.
        let topic: TopicState?
        let sequence: UInt64
        let payloadSize: Int
        var isDropped = false

        init(frame: ByteBuffer, topic: TopicState?, sequence: UInt64, payloadSize: Int) {
            self.frame = frame
            self.topic = topic
            self.sequence = sequence
            self.payloadSize = payloadSize
        }
    }

    /// Queued frames, oldest first; dropped deliveries stay as tombstones until they reach the front.
    private var entries = Deque<Entry>()
    /// Deliveries queued and not dropped.
    private(set) var messageCount = 0
    /// Bytes of the frames queued and not dropped.
    private(set) var byteCount = 0
    /// The newest queued delivery of each topic, for `latest-only`.
    private var newestByTopic: [ObjectIdentifier: Entry] = [:]
    /// What was dropped since the last notices went out, per topic, in the order of the first drop.
    private var drops: [ObjectIdentifier: DropNotice] = [:]
    private var dropOrder: [ObjectIdentifier] = []

    /// Whether nothing waits: no frame and no notice.
    var isEmpty: Bool { entries.isEmpty && dropOrder.isEmpty }

    /// Queues a reply; replies are never dropped.
    mutating func appendReply(_ frame: ByteBuffer) {
        entries.append(Entry(frame: frame, topic: nil, sequence: 0, payloadSize: 0))
        byteCount += frame.readableBytes
    }

    /// Queues a delivery, making room by `policy` when the queue would go over `limits`.
    /// - Returns: how many deliveries were dropped, or nil when the policy is to disconnect and the queue is full.
    mutating func appendDelivery(
        _ frame: ByteBuffer,
        topic: TopicState,
        sequence: UInt64,
        payloadSize: Int,
        policy: OverflowPolicy,
        limits: Limits
    ) -> Int? {
        let key = ObjectIdentifier(topic)
        var dropped = 0
        if policy == .latestOnly, let older = newestByTopic[key], !older.isDropped {
            drop(older)
            dropped += 1
        }
        let entry = Entry(frame: frame, topic: topic, sequence: sequence, payloadSize: payloadSize)
        entries.append(entry)
        newestByTopic[key] = entry
        messageCount += 1
        byteCount += frame.readableBytes
        while messageCount > limits.messages || byteCount > limits.bytes {
            if policy == .disconnect { return nil }
            guard let oldest = entries.first(where: { $0.topic != nil && !$0.isDropped }) else { break }
            drop(oldest)
            dropped += 1
        }
        removeTombstonesAtFront()
        return dropped
    }

    /// Writes notices of what was dropped, then queued frames, while `transport` takes them.
    /// - Returns: the deliveries written and their payload bytes, for the counters.
    mutating func drain(into transport: any SessionTransport) -> (messages: Int, payloadBytes: Int) {
        var messages = 0
        var payloadBytes = 0
        if !dropOrder.isEmpty {
            // The dropped messages were older than everything still queued, so their notices go first.
            var notices = ByteBuffer()
            for key in dropOrder { notices.writeDropNotice(drops[key]!) }
            drops.removeAll(keepingCapacity: true)
            dropOrder.removeAll(keepingCapacity: true)
            transport.write(notices)
        }
        while transport.isWritable, let entry = entries.popFirst() {
            if entry.isDropped { continue }
            byteCount -= entry.frame.readableBytes
            if let topic = entry.topic {
                messageCount -= 1
                messages += 1
                payloadBytes += entry.payloadSize
                topic.delivered += 1
                if newestByTopic[ObjectIdentifier(topic)] === entry { newestByTopic[ObjectIdentifier(topic)] = nil }
            }
            transport.write(entry.frame)
        }
        return (messages, payloadBytes)
    }

    private mutating func drop(_ entry: Entry) {
        guard let topic = entry.topic else { return }
        entry.isDropped = true
        messageCount -= 1
        byteCount -= entry.frame.readableBytes
        topic.dropped += 1
        let key = ObjectIdentifier(topic)
        if newestByTopic[key] === entry { newestByTopic[key] = nil }
        if var notice = drops[key] {
            notice.count += 1
            notice.firstSequence = min(notice.firstSequence, entry.sequence)
            notice.lastSequence = max(notice.lastSequence, entry.sequence)
            drops[key] = notice
        } else {
            drops[key] = DropNotice(topic: topic.topic, count: 1, firstSequence: entry.sequence, lastSequence: entry.sequence)
            dropOrder.append(key)
        }
    }

    private mutating func removeTombstonesAtFront() {
        while let first = entries.first, first.isDropped { entries.removeFirst() }
    }
}
