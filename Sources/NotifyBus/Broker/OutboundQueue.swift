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
/// A client that paused its deliveries (`OPT pause`) is sent its replies at once while its deliveries wait here:
/// ``drainReplies(into:)`` takes the replies out from between them, except those that keep their place behind the
/// deliveries before them (the `OK` that ends a `SUB … latest` comes after the `LAST` frames it brought).
///
/// A subscriber that never reads sits here for good, taking every message and dropping the oldest, so this is a
/// hot path too: frames are copied back to back into chunks of ``chunkSize`` bytes, each entry is a plain value
/// that says where its frame is, and the chunks that dropped frames emptied are reused. Queueing a message then
/// costs a copy of its bytes and no allocation; draining writes runs of adjacent frames as one slice.
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

    /// The size of a chunk of frames; a frame larger than this gets a chunk of its own size.
    static let chunkSize = 64 << 10

    /// One frame waiting: where its bytes are, and for a delivery, what it delivers.
    private struct Entry {
        /// The number of its chunk (see `firstChunkNumber`).
        var chunk: Int
        var offset: Int
        var length: Int
        /// The topic of a delivery; nil for a reply.
        let topic: TopicState?
        let sequence: UInt64
        let payloadSize: Int
        /// For a reply: whether it waits behind the deliveries queued before it even while deliveries are paused.
        var holdsPlace = false
        /// Dropped, or a reply sent ahead of paused deliveries: a tombstone until it reaches the front.
        var isRemoved = false
    }

    /// What was dropped of one topic since the last notices went out. By name: a notice must not keep a topic the
    /// broker forgot alive.
    private struct PendingDrop {
        let topic: Topic
        var count: UInt64
        var firstSequence: UInt64
        var lastSequence: UInt64
    }

    /// Queued frames, oldest first; dropped deliveries stay as tombstones until they reach the front.
    private var entries = Deque<Entry>()
    /// The number of the first entry; entries are numbered in the order queued, so a number stays valid while the
    /// entries before it leave.
    private var firstEntryNumber = 0
    /// The bytes of the queued frames; the last chunk is the one appended to.
    private var chunks = Deque<ByteBuffer>()
    /// The number of the first chunk, as entries refer to chunks by number.
    private var firstChunkNumber = 0
    /// Whether a slice of the last chunk went to the connection: writing into it again would copy it whole, as NIO
    /// may still hold the slice, so the next frame starts a new chunk.
    private var lastChunkIsShared = false
    /// A chunk the queue is done with, kept to be the next one while the queue is not empty.
    private var spareChunk: ByteBuffer?
    /// Deliveries queued and not dropped.
    private(set) var messageCount = 0
    /// Bytes of the frames queued and not dropped.
    private(set) var byteCount = 0
    /// Replies queued that may go out ahead of paused deliveries (see ``drainReplies(into:)``).
    private var passingReplyCount = 0
    /// The number of the newest queued `latest-only` delivery of each topic, while it is queued.
    private var newestByTopic: [ByteKey: Int] = [:]
    /// What was dropped since the last notices went out, per topic, in the order of the first drop; at most
    /// ``dropRecordLimit`` topics, the drops of any other counted in `otherTopicsDropped`.
    private var drops: [PendingDrop] = []
    private var dropIndex: [ByteKey: Int] = [:]
    private var otherTopicsDropped: UInt64 = 0

    /// The most topics the queue keeps a drop notice for between two drains: a subscriber stalled on a flood of
    /// distinct topics is told of the rest in one ``DropNotice/manyTopics`` notice, and costs no more.
    static let dropRecordLimit = 1_024

    /// The topics a drop notice waits for, and the topics whose newest `latest-only` delivery is known: for tests.
    var recordCounts: (drops: Int, newest: Int) { (drops.count, newestByTopic.count) }

    private static let allocator = ByteBufferAllocator()

    /// Whether nothing waits: no frame and no notice.
    var isEmpty: Bool { entries.isEmpty && drops.isEmpty && otherTopicsDropped == 0 }

    /// Whether a reply waits that may go out ahead of paused deliveries; a new reply must then go behind it.
    var hasPassingReplies: Bool { passingReplyCount > 0 }

    /// Queues a reply; replies are never dropped.
    /// - Parameter holdsPlace: whether it stays behind the deliveries queued before it while they are paused.
    mutating func appendReply(_ frame: ByteBuffer, holdsPlace: Bool = false) {
        let (chunk, offset) = store(frame)
        entries.append(
            Entry(chunk: chunk, offset: offset, length: frame.readableBytes, topic: nil, sequence: 0, payloadSize: 0, holdsPlace: holdsPlace)
        )
        byteCount += frame.readableBytes
        if !holdsPlace { passingReplyCount += 1 }
    }

    /// Queues a delivery, making room by `policy` when the queue would go over `limits`. Its bytes are copied at
    /// once, so they may be part of a buffer that is not kept.
    /// - Returns: how many deliveries were dropped, or nil when the policy is to disconnect and the queue is full.
    mutating func appendDelivery(
        _ frame: UnsafeRawBufferPointer,
        topic: TopicState,
        sequence: UInt64,
        payloadSize: Int,
        policy: OverflowPolicy,
        limits: Limits
    ) -> Int? {
        var dropped = 0
        if policy == .latestOnly {
            let key = ByteKey(topic.topic.name)
            if let number = newestByTopic[key], number >= firstEntryNumber, !entries[number - firstEntryNumber].isRemoved {
                drop(at: number - firstEntryNumber)
                dropped += 1
            }
            newestByTopic[key] = firstEntryNumber + entries.count
        }
        let (chunk, offset) = store(frame)
        entries.append(Entry(chunk: chunk, offset: offset, length: frame.count, topic: topic, sequence: sequence, payloadSize: payloadSize))
        messageCount += 1
        byteCount += frame.count
        while messageCount > limits.messages || byteCount > limits.bytes {
            if policy == .disconnect { return nil }
            // The oldest delivery is usually the first entry; a reply can sit before it.
            var oldest = 0
            while oldest < entries.count && (entries[oldest].topic == nil || entries[oldest].isRemoved) { oldest += 1 }
            guard oldest < entries.count else { break }
            drop(at: oldest)
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
        if !drops.isEmpty || otherTopicsDropped > 0 {
            // The dropped messages were older than everything still queued, so their notices go first.
            var notices = ByteBuffer()
            for drop in drops {
                notices.writeDropNotice(
                    DropNotice(topic: drop.topic, count: drop.count, firstSequence: drop.firstSequence, lastSequence: drop.lastSequence)
                )
            }
            if otherTopicsDropped > 0 {
                notices.writeDropNotice(DropNotice(topic: DropNotice.manyTopics, count: otherTopicsDropped, firstSequence: 0, lastSequence: 0))
            }
            drops.removeAll(keepingCapacity: drops.count <= 64)
            dropIndex.removeAll(keepingCapacity: drops.count <= 64)
            otherTopicsDropped = 0
            transport.write(notices)
        }
        while transport.isWritable, let first = popFirst() {
            if first.isRemoved { continue }
            // Adjacent frames of one chunk go out as one slice.
            var end = first.offset + first.length
            var entry = first
            while true {
                byteCount -= entry.length
                if let topic = entry.topic {
                    messageCount -= 1
                    messages += 1
                    payloadBytes += entry.payloadSize
                    topic.delivered += 1
                } else if !entry.holdsPlace {
                    passingReplyCount -= 1
                }
                guard let next = entries.first, !next.isRemoved, next.chunk == first.chunk, next.offset == end else { break }
                entry = popFirst()!
                end += entry.length
            }
            let index = first.chunk - firstChunkNumber
            if index == chunks.count - 1 { lastChunkIsShared = true }
            transport.write(chunks[index].getSlice(at: first.offset, length: end - first.offset)!)
        }
        removeTombstonesAtFront()
        return (messages, payloadBytes)
    }

    /// Writes the queued replies that may pass the deliveries before them, in order, while `transport` takes them;
    /// deliveries, the replies that hold their place and the drop notices stay. For a connection whose deliveries
    /// are paused.
    mutating func drainReplies(into transport: any SessionTransport) {
        var index = 0
        while passingReplyCount > 0, transport.isWritable, index < entries.count {
            defer { index += 1 }
            let entry = entries[index]
            guard entry.topic == nil, !entry.holdsPlace, !entry.isRemoved else { continue }
            entries[index].isRemoved = true
            passingReplyCount -= 1
            byteCount -= entry.length
            let chunkIndex = entry.chunk - firstChunkNumber
            if chunkIndex == chunks.count - 1 { lastChunkIsShared = true }
            transport.write(chunks[chunkIndex].getSlice(at: entry.offset, length: entry.length)!)
        }
        removeTombstonesAtFront()
    }

    /// Copies `frame` to the end of the last chunk, starting a chunk when it does not fit.
    /// - Returns: the number of the chunk and the frame's offset in it.
    private mutating func store(_ frame: ByteBuffer) -> (chunk: Int, offset: Int) {
        frame.withUnsafeReadableBytes { store($0) }
    }

    private mutating func store(_ bytes: UnsafeRawBufferPointer) -> (chunk: Int, offset: Int) {
        if chunks.isEmpty || lastChunkIsShared || chunks[chunks.count - 1].writableBytes < bytes.count {
            startChunk(minimumCapacity: bytes.count)
        }
        let last = chunks.count - 1
        let offset = chunks[last].writerIndex
        chunks[last].writeBytes(bytes)
        return (firstChunkNumber + last, offset)
    }

    private mutating func startChunk(minimumCapacity: Int) {
        let capacity = max(OutboundQueue.chunkSize, minimumCapacity)
        if var chunk = spareChunk, chunk.capacity >= capacity, chunk.capacity <= 2 * capacity {
            spareChunk = nil
            // Reuses the memory unless a slice of it is still waiting in NIO, in which case it gets new memory.
            chunk.clear()
            chunks.append(chunk)
        } else {
            chunks.append(OutboundQueue.allocator.buffer(capacity: capacity))
        }
        lastChunkIsShared = false
    }

    private mutating func popFirst() -> Entry? {
        guard let entry = entries.first else { return nil }
        if let topic = entry.topic, !entry.isRemoved { forgetNewest(of: topic, at: 0) }
        entries.removeFirst()
        firstEntryNumber += 1
        return entry
    }

    private mutating func drop(at index: Int) {
        guard let topic = entries[index].topic else { return }
        let length = entries[index].length
        let sequence = entries[index].sequence
        entries[index].isRemoved = true
        messageCount -= 1
        byteCount -= length
        topic.dropped += 1
        forgetNewest(of: topic, at: index)
        let key = ByteKey(topic.topic.name)
        if let last = drops.indices.last, drops[last].topic == topic.topic {
            record(sequence, in: &drops[last])
        } else if let known = dropIndex[key] {
            record(sequence, in: &drops[known])
        } else if drops.count < OutboundQueue.dropRecordLimit {
            dropIndex[key] = drops.count
            drops.append(PendingDrop(topic: topic.topic, count: 1, firstSequence: sequence, lastSequence: sequence))
        } else {
            otherTopicsDropped += 1
        }
    }

    /// Forgets that the entry at `index`, leaving the queue, is its topic's newest `latest-only` one, if it is:
    /// the table holds only what is queued, however many topics pass through a queue that never empties.
    private mutating func forgetNewest(of topic: TopicState, at index: Int) {
        guard !newestByTopic.isEmpty else { return }
        let key = ByteKey(topic.topic.name)
        if newestByTopic[key] == firstEntryNumber + index { newestByTopic[key] = nil }
    }

    private func record(_ sequence: UInt64, in drop: inout PendingDrop) {
        drop.count += 1
        drop.firstSequence = min(drop.firstSequence, sequence)
        drop.lastSequence = max(drop.lastSequence, sequence)
    }

    /// Lets go of dropped entries at the front, and of the chunks no entry refers to any more.
    private mutating func removeTombstonesAtFront() {
        while !entries.isEmpty && entries[0].isRemoved { _ = popFirst() }
        let firstNeeded = entries.isEmpty ? firstChunkNumber + chunks.count : entries[0].chunk
        while firstChunkNumber < firstNeeded, let chunk = chunks.popFirst() {
            firstChunkNumber += 1
            spareChunk = chunk
        }
        if entries.isEmpty {
            // An empty queue keeps no memory (its chunks all went above): most connections never need it again.
            spareChunk = nil
            newestByTopic.removeAll()
        }
    }
}
