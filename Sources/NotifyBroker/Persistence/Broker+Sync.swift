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
    /// Makes `sessions`' acknowledgements, whose records this batch wrote, wait for a sync that covers them: the next
    /// one to begin (one under way began before they were written).
    func awaitSync(_ sessions: [Session]) {
        let needed = (syncUnderWay ?? syncsStarted) + 1
        for session in sessions {
            session.awaitedSync = needed
            if !session.waitsForSync {
                session.waitsForSync = true
                syncWaiters.append(session)
            }
        }
        startSyncIfDue()
    }

    /// Begins a sync of what was written, or notes that one must follow the sync under way.
    func startSyncIfDue() {
        guard syncUnderWay == nil else {
            writtenSinceSync = true
            return
        }
        writtenSinceSync = false
        guard let stateLog else { return }
        syncsStarted += 1
        let number = syncsStarted
        syncUnderWay = number
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

    /// Lets out the acknowledgements that sync `number` covers (or withdraws every waiting one if it failed), then
    /// begins the next sync if more was written meanwhile.
    func syncEnded(_ number: UInt64, failure: CInt?) {
        guard syncUnderWay == number else { return }  // finished already, at shutdown
        settleSync(number, failure: failure)
        // The flush writes what that carried out, and begins the next sync if it waits for one; else the next sync
        // begins here, for what was written while this one ran.
        flush()
        if syncUnderWay == nil, writtenSinceSync || !syncWaiters.isEmpty { startSyncIfDue() }
    }

    /// Lets out the acknowledgements that sync `number` covers, or withdraws them all, and carries out what their
    /// connections sent meanwhile (without sending: a flush does).
    func settleSync(_ number: UInt64, failure: CInt?) {
        syncUnderWay = nil
        stateLog?.noteSynced()
        var covered: [Session] = []
        if let failure, let stateLog {
            // What the page cache held may be lost: every waiting acknowledgement is withdrawn, and the log rewritten.
            covered = syncWaiters
            syncWaiters.removeAll()
            noteStateNotSaved(stateLog.syncFailure(failure), now: clock().microsecondsSinceEpoch)
        } else {
            covered = syncWaiters.filter { $0.awaitedSync <= number }
            syncWaiters.removeAll { $0.awaitedSync <= number }
        }
        for session in covered { session.waitsForSync = false }
        settle(covered, committed: failure == nil)
        // What they sent meanwhile waited: it is carried out now, and its acknowledgements go in the next sync.
        for session in covered where session.isHoldingBack { carryOutHeldBack(of: session) }
    }

    /// Syncs here and lets out every acknowledgement waiting for a sync: at shutdown, before connections are sent
    /// what they are owed.
    func finishSyncs() {
        guard let stateLog, syncUnderWay != nil || !syncWaiters.isEmpty || writtenSinceSync else { return }
        let synced = (try? stateLog.sync()) != nil
        syncUnderWay = nil
        writtenSinceSync = false
        let waiting = syncWaiters
        syncWaiters.removeAll()
        for session in waiting { session.waitsForSync = false }
        settle(waiting, committed: synced)
    }
}
