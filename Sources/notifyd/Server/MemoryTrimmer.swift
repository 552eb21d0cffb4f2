import NIOCore
import NotifyBus

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

    /// Called every ``interval`` with a count that grows with the work done; trims when it did not grow since the
    /// last call and work was done before that.
    mutating func tick(work: Int) {
        defer { lastWork = work }
        guard work == lastWork else {
            trimmedSinceWork = false
            return
        }
        guard !trimmedSinceWork else { return }
        trimmedSinceWork = true
        trims += 1
        POSIX.trimHeap()
    }
}
