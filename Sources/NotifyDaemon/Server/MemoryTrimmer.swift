import NIOCore
import NotifyProtocol
import NotifySystem

/// Gives the memory a burst freed back to the system once the daemon has been idle for a while.
///
/// glibc keeps what is freed for later allocations, in the main heap and in its arenas: after a burst (a thousand
/// subscribers behind, megabytes queued, then drained) the daemon's RSS stayed near its peak for good, although
/// nothing used it. `malloc_trim(0)` returns the free pages of every arena. It walks the heap, so it runs once per
/// quiet spell, not on a schedule: after an ``interval`` with work followed by one without.
struct MemoryTrimmer {
    /// How often the daemon looks whether it did any work.
    static let interval = TimeAmount.seconds(5)

    private var lastWork: Int?
    private var trimmedSinceWork = true
    /// Times memory was given back, for tests and logs.
    private(set) var trims = 0

    /// How much free memory glibc may keep while the daemon works, since this trimmer gives it back once idle.
    /// Call it before the event loop's thread starts.
    ///
    /// With glibc's defaults the heap gave its free top back as soon as it passed 128 KiB, which under load was
    /// after nearly every batch, and the next batch's buffers then touched fresh pages: 8,000–20,000 page faults for
    /// 300,000 messages of 1 KiB (`/proc/PID/stat` around `notify bench --size 1024 --count 300000`), about 1,500
    /// with a threshold of 16 MiB, and a tenth of the daemon's CPU time. But `malloc_trim` gives back the top of the
    /// main heap only: what a thread's own arena kept below its threshold stayed (4 MiB after a burst,
    /// `Benchmarks/IdleAfterBurst/run.sh`: 1.22 of idle instead of 1.04), so every thread allocates from the main
    /// heap (the event loop does nearly all of it anyway). The mmap threshold stays at glibc's default of 128 KiB,
    /// where setting the trim threshold would freeze it wherever start-up had raised it.
    static func keepFreedMemoryWhileBusy() {
        POSIX.setHeapLimits(trimThreshold: 16 << 20, mmapThreshold: 128 << 10, arenas: 1)
    }

    /// Called every ``interval`` with a count that grows with the work done; trims when it did not grow since the
    /// last call and work was done before that, after `release` let go of what the daemon keeps only to go faster.
    mutating func tick(work: Int, release: () -> Void) {
        defer { lastWork = work }
        guard work == lastWork else {
            trimmedSinceWork = false
            return
        }
        guard !trimmedSinceWork else { return }
        trimmedSinceWork = true
        trims += 1
        release()
        POSIX.trimHeap()
    }
}
