public import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
public import NotifyProtocol
import NotifySystem

/// The broker's state on disk: each topic's buffered message and sequence number, kept in an append-only log
/// (`state.log` in the state directory) so that they survive a restart and a crash.
///
/// ## Durability
/// The broker appends records as it works and writes them once per batch (``write()``), before it sends any frame:
/// an acknowledged publish is in the file's pages in the kernel (copied through the mapped tail, ``LogTail``, or
/// written with `pwrite`) before its `OK` leaves, so it survives the daemon being killed. Surviving power loss as
/// well takes `fsync`, which ``SyncPolicy`` chooses: the broker's own (``sync()``, or ``commit()`` for both), or a
/// ``StateLogSyncer``'s on a thread of its own.
///
/// ## Safety
/// Every record carries a length and a seal, a hash keyed with a secret drawn when the log was created and kept in
/// its header (see ``StateRecord``). Opening the log reads every intact record. A record cut short at the end (a crash
/// mid-write) is dropped. Past damage anywhere else the reader searches on for the next intact record and goes on
/// from there: a client cannot forge one inside a message's payload without the secret. What could not be read is
/// reported, the file is kept aside as `state.log.damaged-<time>` (never deleted), the log is rewritten from what
/// was read, and every topic's sequence number is raised past what the lost records could have held, so that none
/// is given out twice.
///
/// ## Compaction
/// Records pile up as topics are republished; once the file holds more than twice what is live (and at least
/// 1 MiB), ``compact(_:)`` rewrites it from the broker's current state: into a temporary file, synced, then
/// renamed over the log, so a crash at any point leaves one complete log.
///
/// Not thread-safe: it belongs to the broker's thread.
public final class StateLog {
    /// When the log is flushed to stable storage.
    public enum SyncPolicy: String, Sendable, CaseIterable {
        /// Never explicitly: the kernel writes it out within seconds. Survives the daemon's death, not the
        /// machine's. The default, and the cheapest.
        case never
        /// After every commit: what was acknowledged survives power loss, at the cost of a disk flush per batch.
        case always
    }

    /// What opening the log found.
    public struct Contents {
        /// Each topic's last known state, in no particular order.
        public var topics: [String: TopicRecord] = [:]
        /// The topics the broker had forgotten to make room, by name: each one's last sequence number and the time
        /// of its last message (see ``ForgottenTopics``).
        public var forgotten: [String: (sequence: UInt64, time: PublishTime)] = [:]
        /// What was wrong with the file, for the log; empty when it was intact.
        public var problems: [String] = []
        /// Where the damaged file was kept, if it was.
        public var keptAside: String?
    }

    /// One topic as the log remembers it.
    public struct TopicRecord {
        /// The highest sequence number it may have given out.
        public var sequence: UInt64 = 0
        /// Its buffered message as the `MSG` frame, if it has one.
        public var retainedFrame: ByteBuffer?
        /// The messages its history kept, as `MSG` frames, oldest first (more than its limits may keep: the log
        /// holds all it was told since it was last compacted).
        public var history: [ByteBuffer] = []
        /// Where in ``history`` its buffered message is, when the log marked a history record retained instead of
        /// writing the message twice (``retainedFrame`` is then that frame).
        public internal(set) var retainedInHistory: Int?
        /// The sequence numbers of ``history``'s frames, as the log read them: what a mark names.
        var historySequences: [UInt64] = []

        /// Adds the history frame `frame`, numbered `sequence`.
        mutating func appendHistory(_ frame: ByteBuffer, sequence: UInt64) {
            history.append(frame)
            historySequences.append(sequence)
            self.sequence = max(self.sequence, sequence)
        }

        /// Creates a record.
        public init(sequence: UInt64 = 0, retainedFrame: ByteBuffer? = nil, history: [ByteBuffer] = []) {
            self.sequence = sequence
            self.retainedFrame = retainedFrame
            self.history = history
        }
    }

    /// The directory holding the log.
    public let directory: String
    public let syncPolicy: SyncPolicy
    /// How many times ``commit()`` has called `fsync`: what ``SyncPolicy/always`` costs, counted.
    public private(set) var syncs = 0
    /// Set by tests to play a disk that fails every write with this `errno` (the integration tests use a full
    /// tmpfs for the real thing).
    var injectedWriteError: Int32?
    /// Set by tests, for the task they run in, to see the steps of a rewrite, play a crash after one of them, or
    /// play a directory whose `fsync` fails.
    @TaskLocal static var probe: RewriteProbe?
    /// The log's open file. A compaction replaces it, so a ``StateLogSyncer`` is handed a duplicate of its own.
    public var descriptor: CInt { tail.descriptor }
    /// Where the records go: the end of ``descriptor``'s file.
    private var tail: LogTail
    private let lockDescriptor: CInt
    /// The secret this log's records are sealed with.
    private let key: RecordKey
    private var pending = ByteBuffer()
    /// The length of the log's records (the file is longer while its tail prepares space ahead).
    private var fileSize: Int { tail.head }
    /// The size a freshly compacted log would have, as far as the broker reported it.
    private var liveSize: Int
    /// The first line of a log; a format 2 log follows it with its 16-byte ``RecordKey``.
    static let header = Array("NOTIFYD STATE 2\n".utf8)
    /// The first line of a format 1 log, still read to upgrade it.
    static let firstHeader = Array("NOTIFYD STATE 1\n".utf8)
    /// How far ahead of a topic's sequence number its ceiling is written (by the broker, which owns the numbers);
    /// the log needs it to know how far numbers may have gone when records were lost to damage.
    public static let sequenceReserve: UInt64 = 1_000
    /// Below this the log is never compacted; above it, once it is more than twice what is live. A compaction
    /// rewrites every topic and syncs the copy, so with many busy topics it must not come every megabyte.
    private static let minimumCompactionSize = 16 << 20
    /// The largest record body the reader takes: a `MSG` frame of the largest payload any `max-payload` allows
    /// (``ProtocolLimits/largestPayload``) and the longest line the daemon writes (its topic, numbers and provenance
    /// fields, each bounded, come to well under a kilobyte).
    static let largestRecordBody = ProtocolLimits.largestPayload + 1024

    var path: String { directory + "/state.log" }

    /// Opens (or creates) the log in `directory` and reads what it holds.
    ///
    /// Every record a daemon can have written is read, whatever `max-payload` it ran with: a record's body may be as
    /// large as ``largestRecordBody``, so that lowering `max-payload` between two runs never makes a log look
    /// damaged.
    /// - Throws: ``StateLogError`` when the directory or file cannot be used at all (permissions, another daemon).
    public static func open(directory: String, syncPolicy: SyncPolicy = .never) throws -> (StateLog, Contents) {
        try makeDirectory(directory)
        let lock = POSIX.open(directory + "/state.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard lock >= 0 else { throw StateLogError.system("cannot open \(directory)/state.lock", errno) }
        // A daemon that is still exiting (a restart), or a child it forked that has not yet exec'd, may hold the lock
        // for a moment: it is waited for, up to a second, before another daemon is taken to be using the directory.
        var locked = flock(lock, LOCK_EX | LOCK_NB) == 0
        var attempts = 0
        while !locked && errno == EWOULDBLOCK && attempts < 100 {
            attempts += 1
            usleep(10_000)
            locked = flock(lock, LOCK_EX | LOCK_NB) == 0
        }
        guard locked else {
            let code = errno
            POSIX.close(lock)
            if code == EWOULDBLOCK {
                throw StateLogError(description: "another notifyd uses the state directory \(directory); give each daemon its own --state-dir")
            }
            throw StateLogError.system("cannot lock \(directory)/state.lock", code)
        }
        let path = directory + "/state.log"
        // What a rewrite that died left behind; the log it was to replace is still whole.
        if unlink(path + ".tmp") != 0 && errno != ENOENT {
            throw StateLogError.system("cannot remove the unfinished \(path).tmp", errno)
        }
        let maxBody = largestRecordBody
        var contents = Contents()
        let bytes = try readFile(path)
        var loaded = Loaded()
        if let bytes { loaded = load(bytes, into: &contents, maxBody: maxBody) }
        let log = try StateLog(
            directory: directory,
            syncPolicy: syncPolicy,
            lock: lock,
            key: loaded.key ?? .random(),
            fileSize: loaded.intactSize
        )
        if bytes != nil && !contents.problems.isEmpty {
            // Damage: the recovered log is written and synced first, the damaged one kept under a name of its own,
            // and only then replaced, so that whenever the process dies one of them is whole and in place.
            try log.compact(contents.topics.map { ($0.key, $0.value) }, forgotten: contents.forgotten) { contents.keptAside = try keepAside(path) }
        } else if loaded.key == nil {
            // No log yet, or one of format 1: a new one, sealed, with the directory entry synced.
            try log.compact(contents.topics.map { ($0.key, $0.value) }, forgotten: contents.forgotten)
        } else if loaded.intactSize < (try fileLength(path)) {
            // A record cut short at the end, or the zeros of a tail prepared ahead: cut off so that appends start on
            // a record boundary and the file ends with its records.
            guard truncate(path, off_t(loaded.intactSize)) == 0, fsync(log.descriptor) == 0 else {
                throw StateLogError.system("cannot truncate \(path)", errno)
            }
            if !loaded.zeroTail {
                contents.problems.append("dropped an incomplete record at the end of \(path) (a write cut short by a crash)")
            }
        }
        return (log, contents)
    }

    private init(directory: String, syncPolicy: SyncPolicy, lock: CInt, key: RecordKey, fileSize: Int) throws {
        self.directory = directory
        self.syncPolicy = syncPolicy
        self.lockDescriptor = lock
        self.key = key
        self.liveSize = fileSize
        let descriptor = POSIX.open(directory + "/state.log", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw StateLogError.system("cannot open \(directory)/state.log", errno) }
        tail = LogTail(descriptor: descriptor, head: fileSize)
    }

    deinit {
        tail.close()
        POSIX.close(descriptor)
        POSIX.close(lockDescriptor)
    }

    // MARK: - Writing

    /// Records a topic's new buffered message (its `MSG` frame); written at the next ``commit()``.
    public func appendRetained(_ frame: ByteBuffer) {
        frame.withUnsafeReadableBytes { appendRetained($0) }
    }

    /// Records a topic's new buffered message from its `MSG` frame's bytes; written at the next ``commit()``.
    public func appendRetained(_ frame: UnsafeRawBufferPointer) {
        StateRecord.write(kind: StateRecord.retainedKind, body: frame, to: &pending, sealedWith: key)
    }

    /// Records a message its topic's history keeps, from its `MSG` frame's bytes; written at the next ``commit()``.
    public func appendHistory(_ frame: UnsafeRawBufferPointer) {
        StateRecord.write(kind: StateRecord.historyKind, body: frame, to: &pending, sealedWith: key)
    }

    /// Records a message its topic's history keeps, its `MSG` frame written by `writeFrame` into the log's buffer.
    func appendHistory(writing writeFrame: (inout ByteBuffer) -> Void) {
        StateRecord.write(kind: StateRecord.historyKind, to: &pending, sealedWith: key, writeFrame)
    }

    /// Records that `topic`'s buffered message is its history's message numbered `sequence`, recorded already.
    public func appendRetainedInHistory(_ topic: String, _ sequence: UInt64) {
        StateRecord.retainedInHistory(topic: topic, sequence: sequence).write(to: &pending, sealedWith: key)
    }

    /// Records that `topic`'s sequence may reach `sequence`.
    public func appendSequence(_ topic: String, _ sequence: UInt64) {
        StateRecord.sequence(topic: topic, sequence).write(to: &pending, sealedWith: key)
    }

    /// Records that `topic`'s buffered message was cleared.
    public func appendCleared(_ topic: String) {
        StateRecord.cleared(topic: topic).write(to: &pending, sealedWith: key)
    }

    /// Tells the log how big a compacted copy would be, to decide when to compact.
    public func setLiveSize(_ bytes: Int) {
        liveSize = bytes
    }

    /// Whether the file holds enough dead records that ``compact(_:)`` is worth it.
    public var wantsCompaction: Bool {
        fileSize > StateLog.minimumCompactionSize && fileSize > 2 * liveSize
    }

    /// Writes what was appended since the last commit, as ``write()`` does (and an `fsync` under
    /// ``SyncPolicy/always``).
    /// - Throws: ``StateLogError``; the records of this batch are then lost from disk (the broker still has
    ///   them and will write them with its next compaction).
    public func commit() throws {
        if try write() { try sync() }
    }

    /// Writes what was appended since the last commit into the file (its page cache: a copy into the mapped tail,
    /// or one `pwrite`; see ``LogTail``), and leaves its `fsync` to the caller.
    /// - Returns: whether an `fsync` is due (``SyncPolicy/always``, and something was written): ``sync()`` here, or
    ///   elsewhere on ``descriptor`` followed by ``noteSynced()``.
    /// - Throws: ``StateLogError``, as ``commit()``.
    public func write() throws -> Bool {
        guard pending.readableBytes > 0 else { return false }
        defer { pending.clear() }
        if let injectedWriteError { throw StateLogError.system("cannot write \(path)", injectedWriteError) }
        if let code = pending.withUnsafeReadableBytes({ tail.append($0) }) {
            throw StateLogError.system("cannot write \(path)", code)
        }
        return syncPolicy == .always
    }

    /// How many batches were copied into the mapped tail rather than written (``LogTail``).
    var mappedWrites: Int { tail.mappedAppends }

    /// Makes what was written durable (`fsync`), on the caller's thread.
    public func sync() throws {
        syncs += 1
        guard fsync(descriptor) == 0 else { throw StateLogError.system("cannot sync \(path)", errno) }
    }

    /// Counts an `fsync` of ``descriptor`` made elsewhere (a ``StateLogSyncer``'s thread).
    public func noteSynced() {
        syncs += 1
    }

    /// The sentence for an `fsync` that failed with `code`.
    public func syncFailure(_ code: CInt) -> StateLogError {
        StateLogError.system("cannot sync \(path)", code)
    }

    /// Rewrites the log from `topics` (name, state): into `state.log.tmp`, synced, then renamed over `state.log`,
    /// so there is a complete log whenever the process dies. `beforeReplacing` runs once the new log is synced and
    /// before it replaces the old one (recovery keeps the damaged log aside then).
    public func compact(
        _ topics: [(String, TopicRecord)],
        forgotten: [String: (sequence: UInt64, time: PublishTime)] = [:],
        beforeReplacing: () throws -> Void = {}
    ) throws {
        try compact(beforeReplacing: beforeReplacing) { snapshot in
            for (topic, record) in topics {
                for frame in record.history { frame.withUnsafeReadableBytes { snapshot.appendHistory($0) } }
                if let index = record.retainedInHistory, record.historySequences.indices.contains(index) {
                    snapshot.appendRetainedInHistory(topic, record.historySequences[index])
                } else if let frame = record.retainedFrame {
                    frame.withUnsafeReadableBytes { snapshot.appendRetained($0) }
                }
                snapshot.appendSequence(topic, record.sequence)
            }
            for (topic, entry) in forgotten { snapshot.appendForgotten(topic, entry.sequence, entry.time) }
        }
    }

    /// What a compaction writes: each topic's history, oldest first, its buffered message, then its sequence
    /// number, exact (not a ceiling: a clean restart continues without a gap). Frames are taken from where they
    /// are kept, so that a compaction of a million kept messages makes no object per message, and the records go to
    /// the file a chunk at a time (``chunkSize``), so that rewriting a log of a gigabyte holds a megabyte of it.
    public struct Snapshot {
        /// How many bytes of records wait before they are written.
        static let chunkSize = 1 << 20

        fileprivate var buffer: ByteBuffer
        fileprivate let key: RecordKey
        fileprivate let file: CInt
        /// Bytes written to the file so far.
        fileprivate private(set) var written = 0
        /// The `errno` of the first write that failed; nothing is written after it.
        fileprivate private(set) var failure: CInt?
        #if DEBUG
        /// The most bytes that waited at once: what a test holds to about a chunk.
        fileprivate private(set) var mostWaiting = 0
        #endif

        fileprivate init(file: CInt, header: ByteBuffer, key: RecordKey) {
            self.file = file
            self.key = key
            buffer = header
            buffer.reserveCapacity(minimumWritableBytes: Snapshot.chunkSize + (64 << 10))
        }

        /// A message of a topic's history, from its `MSG` frame's bytes.
        public mutating func appendHistory(_ frame: UnsafeRawBufferPointer) {
            StateRecord.write(kind: StateRecord.historyKind, body: frame, to: &buffer, sealedWith: key)
            writeIfFull()
        }

        /// A topic's buffered message, from its `MSG` frame's bytes.
        public mutating func appendRetained(_ frame: UnsafeRawBufferPointer) {
            StateRecord.write(kind: StateRecord.retainedKind, body: frame, to: &buffer, sealedWith: key)
            writeIfFull()
        }

        /// That a topic's buffered message is its history's message numbered `sequence`; after its history.
        public mutating func appendRetainedInHistory(_ topic: String, _ sequence: UInt64) {
            StateRecord.retainedInHistory(topic: topic, sequence: sequence).write(to: &buffer, sealedWith: key)
            writeIfFull()
        }

        /// A topic's sequence number; after its history and buffered message.
        public mutating func appendSequence(_ topic: String, _ sequence: UInt64) {
            StateRecord.sequence(topic: topic, sequence).write(to: &buffer, sealedWith: key)
            writeIfFull()
        }

        /// A topic the broker forgot to make room: its last sequence number and the time of its last message.
        public mutating func appendForgotten(_ topic: String, _ sequence: UInt64, _ time: PublishTime) {
            StateRecord.forgotten(topic: topic, sequence: sequence, time: time.microsecondsSinceEpoch).write(to: &buffer, sealedWith: key)
            writeIfFull()
        }

        private mutating func writeIfFull() {
            if buffer.readableBytes >= Snapshot.chunkSize { write() }
        }

        /// Writes what waits, unless a write failed before.
        fileprivate mutating func write() {
            #if DEBUG
            mostWaiting = max(mostWaiting, buffer.readableBytes)
            #endif
            if failure == nil, buffer.readableBytes > 0 {
                failure = POSIX.writeAll(file, buffer)
                written += buffer.readableBytes
            }
            buffer.clear()
        }
    }

    #if DEBUG
    /// The most bytes of records the last compaction held in memory at once.
    private(set) var lastCompactionMostWaiting = 0
    #endif

    /// Rewrites the log from what `write` puts in its ``Snapshot``, as ``compact(_:beforeReplacing:)`` does.
    public func compact(beforeReplacing: () throws -> Void = {}, _ write: (inout Snapshot) -> Void) throws {
        // Records appended but not committed belong after the snapshot, which already holds their effect; and when
        // the rewrite fails, the next one is written from the broker's state again: either way they are done with.
        defer { pending.clear() }
        let temporary = path + ".tmp"
        if let injectedWriteError { throw StateLogError.system("cannot write \(temporary)", injectedWriteError) }
        let file = POSIX.open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard file >= 0 else { throw StateLogError.system("cannot create \(temporary)", errno) }
        var snapshot = Snapshot(file: file, header: StateLog.fileHeader(key), key: key)
        write(&snapshot)
        snapshot.write()
        #if DEBUG
        lastCompactionMostWaiting = snapshot.mostWaiting
        #endif
        do {
            if let failure = snapshot.failure { throw StateLogError.system("cannot write \(temporary)", failure) }
            guard fsync(file) == 0 else { throw StateLogError.system("cannot sync \(temporary)", errno) }
        } catch {
            POSIX.close(file)
            throw error
        }
        POSIX.close(file)
        try StateLog.probe?.passed(.temporarySynced)
        try beforeReplacing()
        guard rename(temporary, path) == 0 else { throw StateLogError.system("cannot replace \(path)", errno) }
        try StateLog.probe?.passed(.replaced)
        try StateLog.syncDirectory(directory)
        try StateLog.probe?.passed(.directorySynced)
        // The old file is gone from the directory (or kept aside as damaged, which must stay as it was): its tail
        // is left as it is, prepared space and all.
        let replaced = tail.descriptor
        tail = LogTail(descriptor: -1, head: 0)
        POSIX.close(replaced)
        let reopened = POSIX.open(path, O_RDWR | O_CLOEXEC)
        guard reopened >= 0 else { throw StateLogError.system("cannot reopen \(path)", errno) }
        tail = LogTail(descriptor: reopened, head: snapshot.written)
        liveSize = snapshot.written
    }

}
