import CLogTail
import Dispatch
import NIOCore
import NotifySystem
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The end of the state log, where each batch's records go: copied into a shared mapping of the file whose blocks
/// are allocated (`fallocate`) and pages made writable (`MADV_POPULATE_WRITE`) ahead of the records, on a thread of
/// its own, so that a batch costs the broker's thread a copy into the page cache, not a system call. On one CPU the
/// `write` was a fifth of the daemon's time per message and most of its latency tail behind Mosquitto's (issue 51,
/// docs/performance.md).
///
/// Where nothing is prepared yet (the first records, a burst that outran the preparer, a file system without room
/// or without `fallocate`), a batch is written with `pwrite` at the tail, as the log always did, and fails as it
/// did: with the `errno` the broker reports. A store into a prepared page that the file system fails (an I/O
/// error, the file cut short behind the daemon's back) raises SIGBUS, which would kill the daemon: the copy is
/// guarded (CLogTail), the batch written again with `pwrite` (whose error says what went wrong), and the
/// mapping not used again.
///
/// While the daemon runs, the file is longer than its records: the space prepared ahead reads as zeros. The reader
/// takes zeros after the last record as the log's end (`StateLog.load`), and ``close()`` cuts the file back.
///
/// Not thread-safe, but for its preparer: it belongs to the broker's thread.
final class LogTail {
    /// The log's descriptor, open for reading and writing (a mapping needs both), never `O_APPEND` (the prepared
    /// space lies beyond the records, so a write must say where it goes).
    let descriptor: CInt
    /// Where the next record goes: the length of the records, which the file's length exceeds while space is
    /// prepared ahead.
    private(set) var head: Int
    private var mapping: Mapping?
    /// Set when mapping failed for good (SIGBUS, or the mapping could not be made): `pwrite` only from then on.
    private var mappingRetired = false
    /// Where the tail may try again after the preparer failed (a full disk): a megabyte of records later.
    private var retryAt = 0
    /// How many batches went through the mapping (the rest: `pwrite`). For tests, which wait for the preparer.
    private(set) var mappedAppends = 0
    /// Whether space may have been prepared beyond the records: only then does ``close()`` cut the file (a file
    /// the tail never wrote, a damaged log being kept aside say, stays exactly as it is).
    private var extended = false

    /// The largest batch copied through the mapping; larger ones are written with `pwrite`, and prepare nothing.
    /// Making a page writable ahead costs the preparer about what `write` costs per page (some 5 µs a page on
    /// ext4, from a profile on one CPU), so the copy wins where the system call's own cost dominates: a batch of
    /// one small message (16 B: 2 µs of the daemon's 10 per message). Kilobyte messages cost the same either way
    /// (measured: the daemon's CPU per message equal), and on one CPU the preparer's runs of a few hundred
    /// microseconds landed in their tail (p99.9 100 → 630 µs).
    static let largestCopiedBatch = 512
    /// How far ahead of the tail pages are made writable: the most the daemon's resident size grows by while
    /// busy. Large enough that one preparation serves many batches (each costs the broker's CPU a wake-up of the
    /// preparer), small beside a retained topic's share of the memory benchmark.
    static let ahead = 512 << 10
    /// Below this much prepared space a preparation is started.
    static let lowWater = 256 << 10
    /// How much file `fallocate` adds at a time: blocks are cheap, so a megabyte.
    static let allocationStep = 1 << 20
    /// How much file one mapping covers: address space, not memory. The tail moves to a new mapping past it.
    static let span = 256 << 20
    /// The preparations of every log run here, one at a time (one log per daemon; tests open many).
    private static let preparer = DispatchQueue(label: "notifyd.state-log.tail")

    init(descriptor: CInt, head: Int) {
        self.descriptor = descriptor
        self.head = head
    }

    deinit {
        retireMapping()
    }

    /// Appends `bytes` at the tail.
    /// - Returns: nil when they are in the file (the page cache), else the `errno` of the failed write.
    func append(_ bytes: UnsafeRawBufferPointer) -> CInt? {
        let end = head + bytes.count
        let small = bytes.count <= LogTail.largestCopiedBatch
        if small, let mapping, end <= mapping.prepared.load(ordering: .acquiring) {
            if notifyd_guarded_copy(mapping.address(of: head), bytes.baseAddress, bytes.count) == 0 {
                head = end
                mappedAppends += 1
                prepareAhead()
                return nil
            }
            // The file system failed a page: from here on, `pwrite`, whose error says why.
            retireMapping()
            mappingRetired = true
        }
        // Positioned: the file may run ahead of the records (prepared space), so `O_APPEND` would land past it.
        let start = head
        if let failure = POSIX.writeAll(descriptor, bytes, { file, from, count in
            pwrite(file, from, count, off_t(start + (from - bytes.baseAddress!)))
        }) {
            return failure
        }
        head = end
        if small { prepareAhead() }
        return nil
    }

    /// Ends the tail: the preparer finished, the mapping removed, and the space prepared beyond the records cut
    /// off, so that a log closed cleanly ends with its last record.
    /// - Returns: nil, or the `errno` of the `ftruncate` that failed (the zeros stay; the reader skips them).
    @discardableResult
    func close() -> CInt? {
        retireMapping()
        mappingRetired = true
        guard extended else { return nil }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { return errno }
        if Int(info.st_size) > head, ftruncate(descriptor, off_t(head)) != 0 { return errno }
        return nil
    }

    /// Starts a preparation when the prepared space runs low, mapping the file first when it is not mapped.
    private func prepareAhead() {
        if mapping == nil {
            guard !mappingRetired, head >= retryAt else { return }
            mapping = Mapping(descriptor: descriptor, covering: head)
            extended = true
            guard mapping != nil else {
                mappingRetired = true
                return
            }
        }
        guard let mapping else { return }
        let failure = mapping.failure.load(ordering: .acquiring)
        if failure != 0 {
            // Out of room (or no `fallocate` here): `pwrite` until a megabyte more was written, then a new try.
            retireMapping()
            if failure == EOPNOTSUPP || failure == ENOSYS || failure == EINVAL { mappingRetired = true }
            retryAt = head + LogTail.allocationStep
            return
        }
        guard mapping.prepared.load(ordering: .acquiring) - head < LogTail.lowWater,
            !mapping.busy.exchange(true, ordering: .acquiring)
        else { return }
        if head + LogTail.ahead > mapping.end {
            // The tail nears the end of the mapping: a new one from here. The preparer is idle (busy was false).
            mapping.busy.store(false, ordering: .releasing)
            retireMapping()
            prepareAhead()
            return
        }
        let target = head + LogTail.ahead
        let behind = head
        LogTail.preparer.async { mapping.prepare(upTo: target, releasingBelow: behind) }
    }

    /// Waits for the preparer and unmaps.
    private func retireMapping() {
        guard let mapping else { return }
        LogTail.preparer.sync {}
        mapping.unmap()
        self.mapping = nil
    }
}

/// A shared mapping of the log from a page at or below the tail, and how far into it stores are safe.
private final class Mapping: @unchecked Sendable {
    let descriptor: CInt
    /// The file offset the mapping starts at (a page boundary).
    let start: Int
    let base: UnsafeMutableRawPointer
    /// Below this file offset, stores are safe: the blocks are allocated, the file is at least this long and the
    /// pages are writable. Raised by the preparer.
    let prepared: Atomic<Int>
    /// A preparation is queued or running.
    let busy = Atomic<Bool>(false)
    /// The `errno` of the preparer's failure, 0 while none.
    let failure = Atomic<CInt>(0)
    static let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))
    /// Linux 5.14's `MADV_POPULATE_WRITE`, which Glibc's headers may lack.
    static let populateWrite: CInt = 23

    // The preparer's own.
    /// How long the preparer made the file (`fallocate`).
    private var allocated: Int
    /// Below this offset the pages were given back (the tail moved on: they are the page cache's, not the
    /// daemon's resident memory).
    private var released: Int
    /// Whether the kernel takes `MADV_POPULATE_WRITE` (older ones leave the pages to fault in at the first store).
    private var populates = true

    var end: Int { start + LogTail.span }

    init?(descriptor: CInt, covering offset: Int) {
        guard notifyd_guarded_copy_install() == 0 else { return nil }
        start = offset & ~(Mapping.pageSize - 1)
        guard let base = mmap(nil, LogTail.span, PROT_READ | PROT_WRITE, MAP_SHARED, descriptor, off_t(start)),
            base != MAP_FAILED
        else { return nil }
        self.descriptor = descriptor
        self.base = base
        prepared = Atomic(offset)
        allocated = offset
        released = start
    }

    func address(of offset: Int) -> UnsafeMutableRawPointer {
        base + (offset - start)
    }

    /// Allocates and faults in the file up to `target`, and gives back the pages below `behind`'s page. On the
    /// preparer's queue.
    func prepare(upTo target: Int, releasingBelow behind: Int) {
        defer { busy.store(false, ordering: .releasing) }
        let page = Mapping.pageSize
        let target = min((target + page - 1) & ~(page - 1), end)
        // Pages the tail passed with `pwrite` (large batches) are not prepared again: the copy never goes back.
        let from = max(prepared.load(ordering: .relaxed), behind)
        guard target > from else { return }
        if allocated < target {
            let upTo = min((target + LogTail.allocationStep - 1) & ~(LogTail.allocationStep - 1), end)
            guard notifyd_allocate(descriptor, off_t(allocated), off_t(upTo - allocated)) == 0 else {
                failure.store(errno, ordering: .releasing)
                return
            }
            allocated = upTo
        }
        if populates {
            let first = from & ~(page - 1)
            if madvise(address(of: first), target - first, Mapping.populateWrite) != 0 {
                guard errno == EINVAL else {
                    failure.store(errno, ordering: .releasing)
                    return
                }
                populates = false
            }
        }
        prepared.store(target, ordering: .releasing)
        let below = behind & ~(page - 1)
        if below > released, madvise(address(of: released), below - released, MADV_DONTNEED) == 0 {
            released = below
        }
    }

    func unmap() {
        munmap(base, LogTail.span)
    }
}
