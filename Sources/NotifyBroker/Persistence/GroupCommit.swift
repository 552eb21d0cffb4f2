/// Group commit's bookkeeping under `sync = always`: which acknowledgements wait for which `fsync` of the state log,
/// and whether another sync must follow the one under way. The broker owns one and does the syncing; this decides
/// nothing but who is covered.
///
/// Syncs are numbered from 1. A session that waits needs the sync after the one under way (that one may have begun
/// before its records were written), and is settled by the end of any sync numbered at least that: so a steady
/// stream of writers costs one sync at a time, each covering everyone who asked while the last one ran.
struct GroupCommit {
    /// How many syncs were begun.
    private(set) var started: UInt64 = 0
    /// The number of the sync under way.
    private(set) var underWay: UInt64?
    /// Sessions whose acknowledgements wait for a sync (``Session/awaitedSync``), in the order they asked.
    private(set) var waiters: [Session] = []
    /// Whether records were written after the sync under way began: another must follow it.
    private(set) var writtenSince = false

    /// Whether another sync should begin now that none is under way: something was written or someone waits.
    var wantsAnother: Bool { underWay == nil && (writtenSince || !waiters.isEmpty) }

    /// Whether nothing is under way, owed or waited for.
    var isSettled: Bool { underWay == nil && waiters.isEmpty && !writtenSince }

    /// Makes `sessions` wait for the next sync to begin.
    mutating func wait(_ sessions: [Session]) {
        let needed = (underWay ?? started) + 1
        for session in sessions {
            session.awaitedSync = needed
            if !session.waitsForSync {
                session.waitsForSync = true
                waiters.append(session)
            }
        }
    }

    /// The number of the sync to begin now; nil while one is under way (then another follows it) or when there is
    /// nothing to sync (`canSync` false: no log).
    mutating func begin(canSync: Bool) -> UInt64? {
        guard underWay == nil else {
            writtenSince = true
            return nil
        }
        writtenSince = false
        guard canSync else { return nil }
        started += 1
        underWay = started
        return started
    }

    /// Ends sync `number` and returns the sessions it settles, taken off the list: those that waited for it or an
    /// earlier one; all of them when it failed (what the page cache held may be lost, so every acknowledgement
    /// waiting is withdrawn).
    mutating func end(_ number: UInt64, failed: Bool) -> [Session] {
        underWay = nil
        let covered = failed ? waiters : waiters.filter { $0.awaitedSync <= number }
        if failed {
            waiters.removeAll()
        } else {
            waiters.removeAll { $0.awaitedSync <= number }
        }
        for session in covered { session.waitsForSync = false }
        return covered
    }

    /// Ends everything at once, as a sync of the log done here (at shutdown) does, and returns who waited.
    mutating func endAll() -> [Session] {
        underWay = nil
        writtenSince = false
        let waiting = waiters
        waiters.removeAll()
        for session in waiting { session.waitsForSync = false }
        return waiting
    }
}
