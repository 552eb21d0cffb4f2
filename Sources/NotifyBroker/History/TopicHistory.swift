import NIOCore
import NotifyProtocol

/// A topic's last messages, oldest first: what a subscriber that resumes after a sequence number or a time
/// (`SUB … since=`) is sent before live messages, and what `HISTORY` answers.
///
/// Bounded by a count and by bytes (``HistoryLimits``), and trimmed from its oldest end by the broker when the
/// publisher's budget or the daemon's needs the room (history yields; it never makes a publish fail). The messages are
/// kept back to back in one ring of memory, each as a record: what it is (sequence number, time, publisher, sizes),
/// its `MSG` frame as delivered less the start of its line (`MSG <topic> <seq> <time> `, some 35 of a 16-byte
/// message's 100 bytes, which the record and the topic say already and ``withFrame(of:topic:_:)`` writes back), and
/// its record's length again, so that the ring can be walked from either end.
/// Keeping a message costs one copy and no allocation once the ring has grown. A ring, because a full history takes
/// a message for every one it lets go: a buffer that moved what it keeps to its start to make room would copy the
/// whole history for each message (64 KiB per 1 KiB message with the default limits). A record may wrap around the
/// ring's end. The ring is plain memory sized to what it holds (doubling as it grows, up to what the limits allow),
/// and holds the index of its messages too: a topic with one small message in its history pays for one object and
/// one block, not for a `ByteBuffer` and a deque of entries besides (some 230 bytes of the daemon's memory per
/// topic); a replay copies its frames out.
///
/// What left it is remembered as a range of sequence numbers and the time of the last one, so that a resume that
/// asks for more than it holds is told exactly what it misses (by sequence), or that it may have missed it (by
/// time). Owned by the broker's thread.
final class TopicHistory {
    /// One message kept: what it was, and where its record is (until the history next changes).
    struct Entry {
        let sequence: UInt64
        let time: PublishTime
        /// Bytes of its frame, as delivered.
        var length: Int { lineStart + stored }
        /// Bytes of its frame the record holds: all but the start of the line.
        let stored: Int
        /// Bytes of the start of its frame's line the record leaves out; 0 when it holds the whole frame (one whose
        /// line did not start as this daemon writes it).
        let lineStart: Int
        let payloadSize: Int
        /// Its publisher, whose budget it counts against. Not retained, to keep ARC off the publish path: an account
        /// is forgotten only once it holds nothing (``UserAccount/isEmpty``), and while this message is kept it holds
        /// at least this message.
        unowned(unsafe) let owner: UserAccount
        /// Its record's start in the ring.
        let record: Int

        var recordSize: Int { stored + TopicHistory.recordOverhead }
    }

    /// A record: sequence (u64), time (u64 µs), owner (pointer), bytes of the frame held (u32), payload size (u32),
    /// bytes of the frame's line start left out (u16), the frame less that start, then the record's whole size (u32).
    static let headerSize = 34
    static let trailerSize = 4
    /// Bytes a record takes besides its frame.
    static let recordOverhead = headerSize + trailerSize
    /// The largest frame a record holds (its sizes are 32-bit).
    static let maxFrame = Int(UInt32.max) - recordOverhead
    /// The most bytes a history keeps, whatever its limits say: its ring, records and all, then stays below 4 GiB
    /// (a record holds at least a few bytes of a message besides its 38 of overhead), so its offsets fit 32 bits.
    static let mostBytes = 256 << 20

    /// The ring. The records run from `head`, wrapping at the end, for `used` bytes.
    var ring: UnsafeMutableRawBufferPointer {
        get { UnsafeMutableRawBufferPointer(start: ringStart, count: Int(ringSize)) }
        set {
            ringStart = newValue.baseAddress
            ringSize = UInt32(newValue.count)
        }
    }
    var head: Int {
        get { Int(headOffset) }
        set { headOffset = UInt32(truncatingIfNeeded: newValue) }
    }
    var used: Int {
        get { Int(usedBytes) }
        set { usedBytes = UInt32(truncatingIfNeeded: newValue) }
    }
    private(set) var count: Int {
        get { Int(records) }
        set { records = UInt32(truncatingIfNeeded: newValue) }
    }
    // Stored in 32 bits, which the bound on a history's bytes (``mostBytes``) allows, and with what left it kept
    // apart (``Evictions``): the object is 56 bytes, in malloc's 64-byte class (80 with the evictions inline, 96 with
    // 64-bit offsets as well).
    @exclusivity(unchecked) private var ringStart: UnsafeMutableRawPointer?
    @exclusivity(unchecked) private var ringSize: UInt32 = 0
    @exclusivity(unchecked) private var headOffset: UInt32 = 0
    @exclusivity(unchecked) private var usedBytes: UInt32 = 0
    @exclusivity(unchecked) private var records: UInt32 = 0
    #if DEBUG
    /// Bytes of records copied from one ring to another as it grew or shrank: the cost of keeping besides the copy
    /// in, which tests hold to a small multiple of what was appended. Debug builds only: 8 bytes more would put
    /// every history object in the next malloc size class.
    @exclusivity(unchecked) private(set) var bytesRelocated = 0
    #endif
    /// What left the history, once anything did (``Evictions``): kept apart, as most topics never lose a message and
    /// the 24 bytes would put every history object in the next malloc size class (80 bytes instead of 64).
    @exclusivity(unchecked) private var evictions: Evictions?

    /// What left a history: the newest message that did (everything up to it is gone), and how many messages left
    /// it, those the topic had before it began included: what a resume from before them missed at most. Counted, not
    /// read off the run of numbers up to ``lastEvicted``: a topic's numbers can jump (another host's, taken on with
    /// its message), and the numbers skipped were never messages here.
    private final class Evictions {
        @exclusivity(unchecked) var lastSequence: UInt64 = 0
        @exclusivity(unchecked) var lastTime = PublishTime(microsecondsSinceEpoch: 0)
        @exclusivity(unchecked) var messages: UInt64 = 0
    }

    /// How many messages left it, those the topic had before it began included.
    var evictedMessages: UInt64 { evictions?.messages ?? 0 }

    /// The record of what left it, made when the first message does.
    private var evicted: Evictions {
        if let evictions { return evictions }
        let made = Evictions()
        evictions = made
        return made
    }

    /// The newest message the state log holds: a commit appends those kept after it.
    @exclusivity(unchecked) var loggedThrough: UInt64 = 0

    init() {}

    deinit {
        ring.deallocate()
    }

    /// The ring's size in bytes: the memory the history holds for its records.
    var capacity: Int { ring.count }

    var isEmpty: Bool { count == 0 }
    /// Bytes of the messages kept, as kept (the frames less the starts of their lines): what the limits count.
    var bytes: Int { used - count * TopicHistory.recordOverhead }

    /// The newest message that left the history, if any did: everything up to its sequence number is gone.
    var lastEvicted: (sequence: UInt64, time: PublishTime)? {
        guard let evictions, evictions.lastSequence != 0 else { return nil }
        return (evictions.lastSequence, evictions.lastTime)
    }

    /// Keeps the message whose frame is `frame`, and lets the oldest go past `limits`; `released` is called with
    /// each message that leaves, while its record can still be read (``withFrame(of:topic:_:)``), as with every method
    /// here that lets messages go.
    /// - Parameter lineStart: how many bytes at the frame's start are its line start as ``MessageLineStart`` writes
    ///   it for this history's topic, which the record leaves out: known for a frame the daemon just encoded, found
    ///   by ``lineStart(of:topic:sequence:time:)`` in one read from elsewhere; 0 keeps the frame whole.
    /// - Returns: whether the message was kept (not when it alone is over the byte limit).
    func append(
        _ frame: UnsafeRawBufferPointer,
        lineStart: Int,
        sequence: UInt64,
        time: PublishTime,
        payloadSize: Int,
        owner: UserAccount,
        limits: HistoryLimits,
        released: (Entry) -> Void
    ) -> Bool {
        var limits = limits
        limits.bytes = Swift.min(limits.bytes, TopicHistory.mostBytes)
        let stored = frame.count - lineStart
        guard !limits.isOff, stored <= limits.bytes, frame.count <= TopicHistory.maxFrame else {
            skip(sequence: sequence, time: time, released: released)
            return false
        }
        while count > 0 && (count >= limits.messages || bytes + stored > limits.bytes) {
            released(removeOldest()!)
        }
        shrinkIfSparse()
        let size = stored + TopicHistory.recordOverhead
        if used + size > ring.count {
            relocate(capacity: TopicHistory.grownCapacity(needed: used + size, records: count + 1, current: ring.count, limits: limits))
        }
        let record = position(head, plus: used)
        var header = TopicHistory.emptyHeader
        withUnsafeMutableBytes(of: &header) { bytes in
            bytes.storeBytes(of: sequence, toByteOffset: 0, as: UInt64.self)
            bytes.storeBytes(of: time.microsecondsSinceEpoch, toByteOffset: 8, as: UInt64.self)
            bytes.storeBytes(of: UInt(bitPattern: Unmanaged.passUnretained(owner).toOpaque()), toByteOffset: 16, as: UInt.self)
            bytes.storeBytes(of: UInt32(stored), toByteOffset: 24, as: UInt32.self)
            bytes.storeBytes(of: UInt32(payloadSize), toByteOffset: 28, as: UInt32.self)
            bytes.storeBytes(of: UInt16(lineStart), toByteOffset: 32, as: UInt16.self)
        }
        withUnsafeBytes(of: &header) { store(UnsafeRawBufferPointer(rebasing: $0[..<TopicHistory.headerSize]), at: record) }
        store(UnsafeRawBufferPointer(start: frame.baseAddress.map { $0 + lineStart }, count: stored), at: position(record, plus: TopicHistory.headerSize))
        var trailer = UInt32(size)
        withUnsafeBytes(of: &trailer) { store($0, at: position(record, plus: TopicHistory.headerSize + stored)) }
        used += size
        count += 1
        return true
    }

    /// Room for a record's header, read and written whole.
    static let emptyHeader = (UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0))

    /// How many bytes at the start of `frame` are `MSG <topic> <sequence> <time> ` exactly as the daemon writes
    /// them, which a record need not hold; 0 when they are not (a frame is then kept whole).
    static func lineStart(of frame: UnsafeRawBufferPointer, topic: String, sequence: UInt64, time: PublishTime) -> Int {
        var topic = topic
        return topic.withUTF8 { name in
            MessageLineStart.length(in: frame, topic: UnsafeRawBufferPointer(name), sequence: sequence, time: time.microsecondsSinceEpoch)
        }
    }

    /// The size a ring of `current` bytes grows to when `records` records take `needed` bytes.
    ///
    /// Doubling keeps the copies of a growing history few, and what the limits allow is all it ever needs. But not
    /// past what `limits.messages` records of about this size take, and an eighth to spare: a history filling up
    /// with records a byte longer than its first ones (a sequence number gains a digit) would otherwise double
    /// once more for its last few and keep a ring half empty for good, 12.8 KB instead of 6.5 for 64 messages of
    /// 16 bytes (`MESSAGES=64 Benchmarks/RetainedMemory/run.sh`).
    static func grownCapacity(needed: Int, records: Int, current: Int, limits: HistoryLimits) -> Int {
        let most = limits.bytes + recordOverhead * Swift.min(limits.messages, limits.bytes)
        var target = Swift.min(2 * current, most)
        let average = (needed + records - 1) / Swift.max(records, 1)
        let (full, overflow) = average.multipliedReportingOverflow(by: limits.messages)
        let (spared, overflowToo) = full.addingReportingOverflow(full / 8)
        if !overflow, !overflowToo { target = Swift.min(target, spared) }
        return Swift.max(needed, Swift.min(target, Int(UInt32.max)))
    }

    /// Takes note of a message that is not kept (over the limits alone, or with no room in any budget), and of the
    /// messages from `firstGone` on that were never kept either: the history must stay one unbroken run up to the
    /// newest message, so what came before it goes too.
    func skip(sequence: UInt64, firstGone: UInt64? = nil, time: PublishTime, released: (Entry) -> Void) {
        while let entry = removeOldest() { released(entry) }
        if sequence > 0 {
            let first = Swift.min(firstGone ?? sequence, sequence)
            evicted.messages = evicted.messages.saturatingAdd((first...sequence).size)
        }
        noteLastEvicted(sequence, time)
        shrinkIfSparse()
    }

    /// Records that the messages up to `sequence`, the last of them published no later than `time`, are not held:
    /// what a topic had before its history began (`messages` of them at most).
    func noteEvicted(through sequence: UInt64, messages: UInt64, time: PublishTime) {
        if messages > 0 { evicted.messages = evicted.messages.saturatingAdd(messages) }
        noteLastEvicted(sequence, time)
    }

    /// Counts `messages` more as gone without a number to end at: runs of an older numbering, say, that a restart
    /// could not put back.
    func countEvicted(_ messages: UInt64) {
        guard messages > 0 else { return }
        evicted.messages = evicted.messages.saturatingAdd(messages)
    }

    private func noteLastEvicted(_ sequence: UInt64, _ time: PublishTime) {
        // Sequence numbers start at 1; a 0 would read as "nothing left", and nothing numbered 0 was ever kept.
        guard sequence > 0 else { return }
        let evicted = self.evicted
        evicted.lastSequence = sequence
        evicted.lastTime = time
    }

    /// Lets go of the messages up to and including sequence number `sequence`, oldest first.
    func remove(through sequence: UInt64, released: (Entry) -> Void) {
        while count > 0, entry(at: head).sequence <= sequence { released(removeOldest()!) }
        shrinkIfSparse()
    }

    /// Gives back the ring's memory when it is mostly empty: what a history holds is what the budgets count, so a
    /// history the budgets emptied must not keep the ring it had at its peak.
    private func shrinkIfSparse() {
        guard ring.count > 4 * Swift.max(used, 4_096) else { return }
        relocate(capacity: used)
    }

    /// Moves the records to the start of a new ring of `capacity` bytes (at least `used`).
    private func relocate(capacity: Int) {
        let larger = capacity > 0 ? UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 1) : UnsafeMutableRawBufferPointer(start: nil, count: 0)
        if used > 0 {
            load(into: UnsafeMutableRawBufferPointer(rebasing: larger[0..<used]), from: head)
            #if DEBUG
            bytesRelocated += used
            #endif
        }
        ring.deallocate()
        ring = larger
        head = 0
    }

    /// Lets the oldest message go, and returns it.
    func removeOldest() -> Entry? {
        guard count > 0 else { return nil }
        let oldest = entry(at: head)
        head = position(head, plus: oldest.recordSize)
        used -= oldest.recordSize
        count -= 1
        evicted.messages = evicted.messages.saturatingAdd(1)
        noteLastEvicted(oldest.sequence, oldest.time)
        return oldest
    }

}
