#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import NotifyProtocol
import NotifySystem

/// Group commit under `sync = always` with a ``StateLogSyncer``: each batch's records are written on the broker's
/// thread, the `fsync` runs on the syncer's, and an acknowledgement leaves once a sync that began after its record
/// was written has ended. One sync at a time; the batches written meanwhile share the next.
extension Broker {
    /// Makes `sessions`' acknowledgements wait for the next sync of the state log, and begins it unless one is under
    /// way.
    func awaitSync(_ sessions: [Session]) {
        groupCommit.wait(sessions)
        startSyncIfDue()
    }

    /// Begins a sync of what was written, unless one is under way (then another follows it).
    func startSyncIfDue() {
        guard let number = groupCommit.begin(canSync: journal.log != nil), let stateLog = journal.log else { return }
        // The syncer gets a descriptor of its own, which a compaction closing the log's cannot pull from under it.
        let duplicate = fcntl(stateLog.descriptor, F_DUPFD_CLOEXEC, 0)
        guard duplicate >= 0, let stateSyncer else {
            // No descriptor to spare (or no syncer): sync here, as without a syncer. This runs within a flush, which
            // sends what it lets out.
            if duplicate >= 0 { _ = POSIX.close(duplicate) }
            settleSync(number, failure: fsync(stateLog.descriptor) == 0 ? nil : errno)
            return
        }
        stateSyncer.sync(duplicate) { [weak self] failure in
            self?.syncEnded(number, failure: failure)
        }
    }

    /// The syncer's report that sync `number` ended (on the broker's thread).
    func syncEnded(_ number: UInt64, failure: CInt?) {
        guard groupCommit.underWay == number else { return }  // finished already, at shutdown
        settleSync(number, failure: failure)
        // The flush writes what that carried out, and begins the next sync if it waits for one; else the next sync
        // begins here, for what was written while this one ran.
        flush()
        if groupCommit.wantsAnother { startSyncIfDue() }
    }

    /// Settles the acknowledgements sync `number` covers: sent when it succeeded, withdrawn (and the log rewritten)
    /// when it failed.
    func settleSync(_ number: UInt64, failure: CInt?) {
        journal.log?.noteSynced()
        let failed = failure != nil && journal.log != nil
        let covered = groupCommit.end(number, failed: failed)
        if let failure, let stateLog = journal.log {
            noteStateNotSaved(stateLog.syncFailure(failure), now: clock.now().microsecondsSinceEpoch)
        }
        settle(covered, committed: failure == nil)
        // What they sent meanwhile waited: it is carried out now, and its acknowledgements go in the next sync.
        for session in covered where session.isHoldingBack { carryOutHeldBack(of: session) }
    }

    /// Syncs here whatever is under way or owed, at shutdown, and settles everyone who waited.
    func finishSyncs() {
        guard let stateLog = journal.log, !groupCommit.isSettled else { return }
        let synced = (try? stateLog.sync()) != nil
        settle(groupCommit.endAll(), committed: synced)
    }
}
