internal import DequeModule
import NIOCore

/// A topic's last messages, oldest first: what a subscriber that resumes after a sequence number or a time
/// (`SUB … since=`) is sent before live messages, and what `HISTORY` answers.
///
/// Bounded by a count and by bytes of frames (``HistoryLimits``), and trimmed from its oldest end by the broker when the
/// publisher's budget or the daemon's needs the room (history yields; it never makes a publish fail). The frames are
/// kept back to back in one ring of memory, as delivered (`MSG` frames), so that keeping a message costs one copy and
/// no allocation once the ring has grown. A ring, because a full history takes a message for every one it lets go:
/// a buffer that moved what it keeps to its start to make room would copy the whole history for each message
/// (64 KiB per 1 KiB message with the default limits). A frame may wrap around the ring's end. The ring is plain
/// memory sized to what it holds (doubling as it grows, up to the byte limit), not a `ByteBuffer`: a topic with one
/// small message in its history would pay for a buffer object and a power-of-two block besides (some 130 bytes of
/// the daemon's memory per topic); a replay copies its frames out.
///
/// What left it is remembered as a range of sequence numbers and the time of the last one, so that a resume that
/// asks for more than it holds is told exactly what it misses (by sequence), or that it may have missed it (by
/// time). Owned by the broker's thread.
final class TopicHistory {
    /// One message kept: where its frame is, and what it was.
    struct Entry {
        let sequence: UInt64
        let time: PublishTime
        /// Its frame's start in the ring.
        var offset: Int
        let length: Int
        let payloadSize: Int
        /// Its publisher, whose budget it counts against. Not retained, to keep ARC off the publish path: an account
        /// is forgotten only once it holds nothing (``UserAccount/isEmpty``), and while this message is kept it holds
        /// at least this message.
        unowned(unsafe) let owner: UserAccount
    }

    /// The ring. What is kept runs from the oldest entry's offset, wrapping at the end, for ``bytes``.
    @exclusivity(unchecked) private var ring = UnsafeMutableRawBufferPointer(start: nil, count: 0)
    #if DEBUG
    /// Bytes of frames copied from one ring to another as it grew or shrank: the cost of keeping besides the copy
    /// in, which tests hold to a small multiple of what was appended. Debug builds only: 8 bytes more would put
    /// every history object in the next malloc size class.
    @exclusivity(unchecked) private(set) var bytesRelocated = 0
    #endif
    @exclusivity(unchecked) private var entries = Deque<Entry>()
    /// Bytes of the frames kept.
    @exclusivity(unchecked) private(set) var bytes = 0
    /// Payload bytes of the messages kept: what they count against their publisher's budget.
    @exclusivity(unchecked) private(set) var payloadBytes = 0
    /// The newest message that left the history, if any did: everything up to its sequence number is gone.
    @exclusivity(unchecked) private(set) var lastEvicted: (sequence: UInt64, time: PublishTime)?
    /// The oldest message that ever left it (1 until one did): what left is the run from it to ``lastEvicted``.
    @exclusivity(unchecked) private(set) var firstEvicted: UInt64 = 1

    /// The newest message the state log holds: a commit appends those kept after it.
    @exclusivity(unchecked) var loggedThrough: UInt64 = 0

    init() {}

    deinit {
        ring.deallocate()
    }

    /// The ring's size in bytes: the memory the history holds for its frames.
    var capacity: Int { ring.count }

    var count: Int { entries.count }
    var isEmpty: Bool { entries.isEmpty }

    /// Keeps the message whose frame is `frame`, and lets the oldest go past `limits`; `released` is called with
    /// each message that leaves.
    /// - Returns: whether the message was kept (not when it alone is over the byte limit).
    func append(
        _ frame: UnsafeRawBufferPointer,
        sequence: UInt64,
        time: PublishTime,
        payloadSize: Int,
        owner: UserAccount,
        limits: HistoryLimits,
        released: (Entry) -> Void
    ) -> Bool {
        guard !limits.isOff, frame.count <= limits.bytes else {
            skip(sequence: sequence, time: time, released: released)
            return false
        }
        while !entries.isEmpty && (entries.count >= limits.messages || bytes + frame.count > limits.bytes) {
            released(removeOldest()!)
        }
        shrinkIfSparse()
        if bytes + frame.count > ring.count {
            // Doubling keeps the copies of a growing history few; the limit is all it ever needs.
            relocate(capacity: Swift.max(bytes + frame.count, Swift.min(2 * ring.count, limits.bytes)))
        }
        let offset = entries.last.map { ($0.offset + $0.length) % ring.count } ?? 0
        let first = Swift.min(frame.count, ring.count - offset)
        UnsafeMutableRawBufferPointer(rebasing: ring[offset..<(offset + first)]).copyMemory(from: UnsafeRawBufferPointer(rebasing: frame[..<first]))
        if first < frame.count {
            UnsafeMutableRawBufferPointer(rebasing: ring[0..<(frame.count - first)]).copyMemory(from: UnsafeRawBufferPointer(rebasing: frame[first...]))
        }
        entries.append(Entry(sequence: sequence, time: time, offset: offset, length: frame.count, payloadSize: payloadSize, owner: owner))
        bytes += frame.count
        payloadBytes += payloadSize
        return true
    }

    /// Takes note of a message that is not kept (over the limits alone, or with no room in any budget), and of the
    /// messages from `firstGone` on that were never kept either: the history must stay one unbroken run up to the
    /// newest message, so what came before it goes too.
    func skip(sequence: UInt64, firstGone: UInt64? = nil, time: PublishTime, released: (Entry) -> Void) {
        while let entry = removeOldest() { released(entry) }
        if lastEvicted == nil { firstEvicted = firstGone ?? sequence }
        lastEvicted = (sequence, time)
        shrinkIfSparse()
    }

    /// Records that the messages up to `sequence`, the last of them published no later than `time`, are not held:
    /// what a topic had before its history began.
    func noteEvicted(through sequence: UInt64, time: PublishTime) {
        if lastEvicted == nil { firstEvicted = 1 }
        lastEvicted = (sequence, time)
    }

    /// Lets go of the messages up to and including sequence number `sequence`, oldest first.
    func remove(through sequence: UInt64, released: (Entry) -> Void) {
        while let first = entries.first, first.sequence <= sequence { released(removeOldest()!) }
        shrinkIfSparse()
    }

    /// Gives back the ring's memory when it is mostly empty: what a history holds is what the budgets count, so a
    /// history the budgets emptied must not keep the ring it had at its peak.
    private func shrinkIfSparse() {
        guard ring.count > 4 * Swift.max(bytes, 4_096) else { return }
        relocate(capacity: bytes)
    }

    /// Moves what is kept to the start of a new ring of `capacity` bytes (at least ``bytes``).
    private func relocate(capacity: Int) {
        let larger = capacity > 0 ? UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 1) : UnsafeMutableRawBufferPointer(start: nil, count: 0)
        if let start = entries.first?.offset {
            let first = Swift.min(bytes, ring.count - start)
            UnsafeMutableRawBufferPointer(rebasing: larger[0..<first]).copyMemory(from: UnsafeRawBufferPointer(rebasing: ring[start..<(start + first)]))
            if first < bytes {
                UnsafeMutableRawBufferPointer(rebasing: larger[first..<bytes]).copyMemory(from: UnsafeRawBufferPointer(rebasing: ring[0..<(bytes - first)]))
            }
            let oldCapacity = ring.count
            for index in entries.indices { entries[index].offset = (entries[index].offset - start + oldCapacity) % oldCapacity }
            #if DEBUG
            bytesRelocated += bytes
            #endif
        }
        ring.deallocate()
        ring = larger
    }

    /// Lets the oldest message go, and returns it.
    func removeOldest() -> Entry? {
        guard let oldest = entries.popFirst() else { return nil }
        if lastEvicted == nil { firstEvicted = oldest.sequence }
        lastEvicted = (oldest.sequence, oldest.time)
        bytes -= oldest.length
        payloadBytes -= oldest.payloadSize
        return oldest
    }

    /// The sequence number of the oldest message kept after `sequence`.
    func firstSequence(after sequence: UInt64) -> UInt64? {
        entries.first(where: { $0.sequence > sequence })?.sequence
    }

    /// The sequence number of the oldest message kept.
    var oldestSequence: UInt64? { entries.first?.sequence }

    /// The sequence number of the newest message kept.
    var newestSequence: UInt64? { entries.last?.sequence }

    /// Whether the message numbered `sequence` is still kept.
    func contains(_ sequence: UInt64) -> Bool {
        guard let first = entries.first, let last = entries.last else { return false }
        return first.sequence <= sequence && sequence <= last.sequence
    }

    /// Calls `body` with each message kept whose sequence number is above `sequence`, oldest first, with its frame
    /// in place (valid during the call only; a frame that wraps around the ring's end is a copy of its two parts).
    func forEach(after sequence: UInt64, _ body: (Entry, UnsafeRawBufferPointer) -> Void) {
        // From the newest back: a commit asks for the few kept since the last one.
        var start = entries.endIndex
        while start > entries.startIndex, entries[start - 1].sequence > sequence { start -= 1 }
        for entry in entries[start...] { withFrame(of: entry) { body(entry, $0) } }
    }

    /// Calls `body` with each message kept published after `time`, oldest first, with its frame in place.
    func forEach(after time: PublishTime, _ body: (Entry, UnsafeRawBufferPointer) -> Void) {
        for entry in entries where entry.time > time { withFrame(of: entry) { body(entry, $0) } }
    }

    /// Calls `body` with up to `count` of the messages kept (all for nil), newest first, until it returns false.
    func forEach(newestFirst count: Int?, _ body: (Entry) -> Bool) {
        for entry in entries.reversed().prefix(count ?? entries.count) {
            guard body(entry) else { return }
        }
    }

    /// The last `count` messages kept (all of them for nil), oldest first, with their frames in place.
    func forEach(last count: Int?, _ body: (Entry, UnsafeRawBufferPointer) -> Void) {
        for entry in entries.suffix(count ?? entries.count) { withFrame(of: entry) { body(entry, $0) } }
    }

    /// Calls `body` with the frame of `entry`: in the ring where it is in one piece, else a copy of its two parts.
    func withFrame<Result>(of entry: Entry, _ body: (UnsafeRawBufferPointer) -> Result) -> Result {
        let first = ring.count - entry.offset
        if entry.length <= first {
            return body(UnsafeRawBufferPointer(rebasing: ring[entry.offset..<(entry.offset + entry.length)]))
        }
        return withUnsafeTemporaryAllocation(byteCount: entry.length, alignment: 1) { copy in
            UnsafeMutableRawBufferPointer(rebasing: copy[0..<first]).copyMemory(from: UnsafeRawBufferPointer(rebasing: ring[entry.offset...]))
            UnsafeMutableRawBufferPointer(rebasing: copy[first...]).copyMemory(from: UnsafeRawBufferPointer(rebasing: ring[0..<(entry.length - first)]))
            return body(UnsafeRawBufferPointer(copy))
        }
    }
}
