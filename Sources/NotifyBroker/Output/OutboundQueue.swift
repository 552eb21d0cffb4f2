internal import DequeModule
import NIOCore
import NotifyProtocol

/// A connection's frames waiting for its socket.
///
/// It is used only while the socket cannot take more (NIO's write buffer is over its high-water mark), so a
/// subscriber that keeps up never touches it. For one that falls behind it is bounded: a delivery that would take
/// it past ``Limits`` makes room by the policy of the subscription it came through (see ``OverflowPolicy``), and
/// every message dropped is remembered per topic, to be announced with `DROP` before anything else is sent.
/// Replies are never dropped; the daemon stops reading a connection that does not read its replies.
///
/// A client that paused its deliveries (`OPT pause`) is still sent what it asked for while its live deliveries wait
/// here: replies, and the buffered messages a `SUB … latest` brings (so that its `OK` comes, after them). They
/// *flow*: ``drainFlowing(into:)`` takes them out from between the live deliveries, in order. What leaves from the
/// middle, dropped or flowed, is a tombstone until it reaches the front; when tombstones outnumber the frames, the
/// queue is compacted, so a front entry that stays does not make them pile up.
///
/// A subscriber that never reads sits here for good, taking every message and dropping the oldest, so this is a
/// hot path too: frames are copied back to back into chunks of ``chunkSize`` bytes, each entry is a plain value
/// that says where its frame is, and the chunks that dropped frames emptied are reused. Queueing a message then
/// costs a copy of its bytes and no allocation; draining writes runs of adjacent frames as one slice.
///
/// Owned by the broker's thread, like its session.
struct OutboundQueue: ~Copyable {
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
    ///
    /// A plain value, 40 bytes: a subscriber that never reads queues and drops one for every message published, and
    /// an entry that held its topic as a reference was copied by the deque through its value witnesses, a retain
    /// and a release each time (a third of the daemon's time with 100 subscribers behind). The queue holds the
    /// topic itself instead: one retain when a delivery is queued, one release when it leaves (written, dropped,
    /// taken out, flowed, or with the queue).
    private struct Entry {
        /// The number of its chunk (see `firstChunkNumber`).
        var chunk: Int
        /// Its frame's offset in the chunk, and its length (32 bits, as a `ByteBuffer`'s).
        var offset: UInt32
        var length: UInt32
        /// The topic of a delivery, retained by the queue while the entry is queued and not removed; nil for a
        /// reply. A tombstone's is released: compared, never followed.
        let topic: Unmanaged<TopicState>?
        let sequence: UInt64
        let payloadSize: UInt32
        /// A reply, or a buffered message a `SUB … latest` brought: it goes out while live deliveries are paused.
        let flowsWhilePaused: Bool
        /// Dropped, or flowed out ahead of paused deliveries: a tombstone until it reaches the front.
        var isRemoved = false

        var end: Int { Int(offset) + Int(length) }
        var lengthInBytes: Int { Int(length) }
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
    /// Entries queued, not removed, that flow while deliveries are paused (see ``drainFlowing(into:)``).
    private var flowingCount = 0
    /// Tombstones among the entries, to tell when to compact.
    private var removedCount = 0
    /// The number of the newest queued `latest-only` delivery of each topic, while it is queued.
    private var newestByTopic: [ByteKey: Int] = [:]
    /// What was dropped since the last notices went out.
    private var drops = DropTally()
    /// The number of the first entry that may be a delivery not dropped: all before it are replies or tombstones.
    /// Making room starts looking for the oldest delivery here, not at the front: a reply that stays at the front
    /// (its connection takes nothing) keeps the tombstones behind it until compaction, and looking through them for
    /// every delivery queued made a stalled subscriber cost the daemon time growing with its queue, per message.
    private var oldestDeliveryFrom = 0
    /// Entries looked at to find the oldest delivery, for tests.
    private(set) var entriesScannedForOldest = 0

    /// The most topics the queue keeps a drop notice of their own for between two drains (see ``DropTally``).
    static let dropRecordLimit = DropTally.topicLimit

    /// The topics a drop notice waits for, and the topics whose newest `latest-only` delivery is known: for tests.
    var recordCounts: (drops: Int, newest: Int) { (drops.topicCount, newestByTopic.count) }

    private static let allocator = ByteBufferAllocator()

    init() {}

    deinit {
        for entry in entries where !entry.isRemoved { entry.topic?.release() }
    }

    /// Whether nothing waits: no frame and no notice.
    var isEmpty: Bool { entries.isEmpty && drops.isEmpty }

    /// Whether something waits that flows while deliveries are paused: what flows after it must go behind it.
    var hasFlowingEntries: Bool { flowingCount > 0 }

    /// Entries kept, tombstones included, for tests.
    var entryCount: Int { entries.count }

    /// Queues a reply; replies are never dropped.
    mutating func appendReply(_ frame: ByteBuffer) {
        let (chunk, offset) = store(frame)
        entries.append(
            Entry(
                chunk: chunk,
                offset: UInt32(offset),
                length: UInt32(frame.readableBytes),
                topic: nil,
                sequence: 0,
                payloadSize: 0,
                flowsWhilePaused: true
            )
        )
        byteCount += frame.readableBytes
        flowingCount += 1
    }

    /// Queues a delivery, making room by `policy` when the queue would go over `limits`. Its bytes are copied at
    /// once, so they may be part of a buffer that is not kept.
    /// - Parameter isReplay: a buffered message a `SUB … latest` brought, which flows while deliveries are paused.
    /// - Returns: how many deliveries were dropped, or nil when the policy is to disconnect and the queue is full.
    mutating func appendDelivery(
        _ frame: UnsafeRawBufferPointer,
        topic: TopicState,
        sequence: UInt64,
        payloadSize: Int,
        policy: OverflowPolicy,
        limits: Limits,
        isReplay: Bool = false
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
        entries.append(
            Entry(
                chunk: chunk,
                offset: UInt32(offset),
                length: UInt32(frame.count),
                topic: Unmanaged.passRetained(topic),
                sequence: sequence,
                payloadSize: UInt32(payloadSize),
                flowsWhilePaused: isReplay
            )
        )
        messageCount += 1
        byteCount += frame.count
        if isReplay { flowingCount += 1 }
        while messageCount > limits.messages || byteCount > limits.bytes {
            if policy == .disconnect { return nil }
            // The oldest delivery is usually the first entry; replies and tombstones can sit before it.
            var oldest = max(0, oldestDeliveryFrom - firstEntryNumber)
            while oldest < entries.count && (entries[oldest].topic == nil || entries[oldest].isRemoved) {
                oldest += 1
                entriesScannedForOldest &+= 1
            }
            oldestDeliveryFrom = firstEntryNumber + oldest
            guard oldest < entries.count else { break }
            drop(at: oldest)
            dropped += 1
        }
        removeTombstonesAtFront()
        compactIfMostlyTombstones()
        return dropped
    }

    /// Writes notices of what was dropped, then queued frames, while `transport` takes them.
    /// - Returns: the deliveries written and their payload bytes, for the counters.
    mutating func drain(into transport: any SessionTransport) -> (messages: Int, payloadBytes: Int) {
        var messages = 0
        var payloadBytes = 0
        if !drops.isEmpty {
            // The dropped messages were older than everything still queued, so their notices go first.
            var notices = ByteBuffer()
            for notice in drops.take() { notices.writeDropNotice(notice) }
            transport.write(notices)
        }
        while transport.isWritable, let first = popFirst() {
            if first.isRemoved {
                removedCount -= 1
                continue
            }
            // Adjacent frames of one chunk go out as one slice.
            var end = first.end
            var entry = first
            while true {
                byteCount -= entry.lengthInBytes
                if let topic = entry.topic {
                    messageCount -= 1
                    messages += 1
                    payloadBytes += Int(entry.payloadSize)
                    topic._withUnsafeGuaranteedRef { $0.delivered += 1 }
                    topic.release()
                }
                if entry.flowsWhilePaused { flowingCount -= 1 }
                guard let next = entries.first, !next.isRemoved, next.chunk == first.chunk, Int(next.offset) == end else { break }
                entry = popFirst()!
                end += entry.lengthInBytes
            }
            let index = first.chunk - firstChunkNumber
            if index == chunks.count - 1 { lastChunkIsShared = true }
            let start = Int(first.offset)
            transport.write(chunks[index].getSlice(at: start, length: end - start)!)
        }
        removeTombstonesAtFront()
        return (messages, payloadBytes)
    }

    /// Writes what flows while deliveries are paused (replies, and buffered messages a `SUB … latest` brought), in
    /// order, while `transport` takes it; live deliveries and drop notices stay.
    /// - Returns: the deliveries written and their payload bytes, for the counters.
    mutating func drainFlowing(into transport: any SessionTransport) -> (messages: Int, payloadBytes: Int) {
        var messages = 0
        var payloadBytes = 0
        var index = 0
        while flowingCount > 0, transport.isWritable, index < entries.count {
            defer { index += 1 }
            guard entries[index].flowsWhilePaused, !entries[index].isRemoved else { continue }
            let entry = remove(at: index)
            if let topic = entry.topic {
                messages += 1
                payloadBytes += Int(entry.payloadSize)
                topic._withUnsafeGuaranteedRef { $0.delivered += 1 }
                topic.release()
            }
            let chunkIndex = entry.chunk - firstChunkNumber
            if chunkIndex == chunks.count - 1 { lastChunkIsShared = true }
            transport.write(chunks[chunkIndex].getSlice(at: Int(entry.offset), length: entry.lengthInBytes)!)
        }
        removeTombstonesAtFront()
        compactIfMostlyTombstones()
        return (messages, payloadBytes)
    }

    /// Takes out, without a notice, the queued deliveries and drop notices of the topics `isDenied` names: after a
    /// change of access policy, a connection is sent nothing of a topic it may no longer read.
    mutating func removeDeliveries(where isDenied: (Topic) -> Bool) {
        for index in entries.indices where !entries[index].isRemoved {
            guard let topic = entries[index].topic, topic._withUnsafeGuaranteedRef({ isDenied($0.topic) }) else { continue }
            remove(at: index).topic?.release()
        }
        drops.removeAll(where: isDenied)
        removeTombstonesAtFront()
        compactIfMostlyTombstones()
    }

    /// Rewrites the queue without its tombstones once they are more than the frames (and many): what stays at the
    /// front, a paused delivery or a `latest-only` topic's only message, would otherwise keep every chunk behind it.
    private mutating func compactIfMostlyTombstones() {
        guard removedCount >= 1_024, removedCount > entries.count - removedCount else { return }
        var topicOfNewest: [Int: ByteKey] = [:]
        for (key, number) in newestByTopic { topicOfNewest[number] = key }
        newestByTopic.removeAll(keepingCapacity: true)
        let old = entries
        let oldChunks = chunks
        let oldFirstChunk = firstChunkNumber
        entries = Deque(minimumCapacity: old.count - removedCount)
        chunks = Deque()
        firstChunkNumber = 0
        lastChunkIsShared = false
        spareChunk = nil
        for (position, entry) in old.enumerated() where !entry.isRemoved {
            let bytes = oldChunks[entry.chunk - oldFirstChunk].getSlice(at: Int(entry.offset), length: entry.lengthInBytes)!
            var moved = entry
            let (chunk, offset) = store(bytes)
            moved.chunk = chunk
            moved.offset = UInt32(offset)
            if let key = topicOfNewest[firstEntryNumber + position] { newestByTopic[key] = firstEntryNumber + entries.count }
            entries.append(moved)
        }
        removedCount = 0
        oldestDeliveryFrom = firstEntryNumber
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

    /// Takes out the first entry; a delivery that is not a tombstone still holds its topic, which the caller now
    /// releases.
    private mutating func popFirst() -> Entry? {
        guard let entry = entries.first else { return nil }
        if let topic = entry.topic, !entry.isRemoved { forgetNewest(of: topic, at: 0) }
        entries.removeFirst()
        firstEntryNumber += 1
        return entry
    }

    private mutating func drop(at index: Int) {
        guard let topic = entries[index].topic else { return }
        let entry = remove(at: index)
        let name = topic._withUnsafeGuaranteedRef { state in
            state.dropped += 1
            return state.topic
        }
        drops.record(name, count: 1, first: entry.sequence, last: entry.sequence)
        topic.release()
    }

    /// Takes the entry at `index` out of the counts and marks it a tombstone: the one place that keeps them in
    /// step, whether it was dropped, flowed out ahead of paused deliveries, or may no longer be sent. The entry
    /// returned holds its topic, which the caller releases.
    @discardableResult
    private mutating func remove(at index: Int) -> Entry {
        let entry = entries[index]
        entries[index].isRemoved = true
        removedCount += 1
        byteCount -= entry.lengthInBytes
        if entry.flowsWhilePaused { flowingCount -= 1 }
        if let topic = entry.topic {
            messageCount -= 1
            forgetNewest(of: topic, at: index)
        }
        return entry
    }

    /// Forgets that the entry at `index`, leaving the queue, is its topic's newest `latest-only` one, if it is:
    /// the table holds only what is queued, however many topics pass through a queue that never empties.
    private mutating func forgetNewest(of topic: Unmanaged<TopicState>, at index: Int) {
        guard !newestByTopic.isEmpty else { return }
        let key = topic._withUnsafeGuaranteedRef { ByteKey($0.topic.name) }
        if newestByTopic[key] == firstEntryNumber + index { newestByTopic[key] = nil }
    }

    /// Lets go of dropped entries at the front, and of the chunks no entry refers to any more.
    private mutating func removeTombstonesAtFront() {
        while !entries.isEmpty && entries[0].isRemoved {
            _ = popFirst()
            removedCount -= 1
        }
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
