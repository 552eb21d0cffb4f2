import NIOCore
import NotifyProtocol

/// The broker's side of the state log: what is restored at start, what each batch appends and commits before its
/// replies leave, and how a failed write is answered (see ``StateLog``).
extension Broker {
    /// Restores the topics the log remembers and keeps the log up to date from now on. Call it once, before the
    /// first connection.
    public func attach(_ log: StateLog, restoring contents: StateLog.Contents) {
        var decoder = ServerFrameDecoder()
        for (name, record) in contents.topics {
            guard let topic = try? Topic(name) else { continue }
            let state = TopicState(topic: topic)
            state.sequence = record.sequence
            state.persistedSequence = record.sequence
            // The history first: a buffered message the log marked on one of its records is that record again,
            // if the history (within today's limits) still keeps it.
            let restored = record.history.isEmpty ? [] : restoreHistory(record.history, of: state, decoder: &decoder)
            if let frame = record.retainedFrame {
                var input = frame
                if case .delivery(let delivery)? = try? decoder.decode(buffer: &input) {
                    let owner = account(charging: delivery.publisher)
                    owner.retainedBytes += delivery.payload.readableBytes
                    owner.retainedTopics += 1
                    if let index = record.retainedInHistory, restored.contains(index) {
                        state.retainInHistory(delivery.sequence)
                    } else if record.retainedInHistory == nil, holdsTheSame(frame, sequence: delivery.sequence, in: state) {
                        // A log written before marks (notifyd before issue 38) holds the message twice: once in
                        // memory from now on, and marked at the next compaction.
                        state.retainInHistory(delivery.sequence)
                    } else {
                        state.retainInBlock(RetainedMessage.make(
                            frame: frame,
                            payloadSize: delivery.payload.readableBytes,
                            sequence: delivery.sequence,
                            owner: owner
                        ))
                    }
                    state.lastPublished = max(state.lastPublished ?? delivery.time, delivery.time)
                }
            }
            topicTable.restore(state)
            if let time = state.lastPublished { clock.restored(time) }
        }
        for (name, forgotten) in contents.forgotten {
            topicTable.restoreForgotten(name, sequence: forgotten.sequence, time: forgotten.time)
            // Their messages' times count too: publish times never go back, even for a topic made again.
            if forgotten.time != .distantFuture { clock.restored(forgotten.time) }
        }
        journal.log = log
    }

    /// Whether `state`'s restored history holds `frame`, numbered `sequence`, byte for byte: the same number alone
    /// does not say so in a log read after damage.
    private func holdsTheSame(_ frame: ByteBuffer, sequence: UInt64, in state: TopicState) -> Bool {
        guard let history = state.history, let entry = history.entry(sequence: sequence) else { return false }
        return frame.withUnsafeReadableBytes { held in
            history.withFrame(of: entry, topic: state.topic.name) { kept in held.count == kept.count && ByteKey.equalBytes(held, kept) }
        }
    }

    /// Writes the exact state to the log, compacted: on a clean shutdown, so a restart continues without gaps.
    public func saveState() throws {
        guard let stateLog = journal.log else { return }
        settleHistory()
        journal.appendMarked()
        try stateLog.commit()
        try compactState()
    }

    /// Rewrites the state log now if it could not be written and its pause has passed (see
    /// ``BrokerEvent/stateNotSaved(_:retryingIn:)``). Every batch tries as well; the daemon calls this when a pause
    /// ends, so that a log is saved again, and the service says so, without waiting for the next client.
    public func retrySavingState() {
        guard journal.health.needsRewrite else { return }
        flush()
    }

    /// What became of a batch's state records.
    enum CommitOutcome {
        /// In the log (or no log): the batch's acknowledgements may go.
        case committed
        /// Not written: the acknowledgements that waited for them are withdrawn.
        case failed
        /// Written, and being synced by the ``stateSyncer``: the acknowledgements wait for it.
        case syncing
    }

    /// Writes the batch's state records; runs before the batch's replies go out.
    func commitState() -> CommitOutcome {
        guard let stateLog = journal.log else { return .committed }
        // What a sync made in place carried out in the middle of a flush is in the batch still: into the histories
        // first, so that its buffered messages are logged as they are.
        settleHistory()
        let now = clock.now().microsecondsSinceEpoch
        do {
            if journal.health.needsRewrite {
                guard journal.health.mayRewrite(now: now) else { return .failed }
                try compactState()
                journal.health.rewritten()
                onEvent?(.stateSavedAgain)
            } else {
                journal.appendMarked()
                let syncDue = try stateLog.write()
                stateLog.setLiveSize(topicTable.retainedFrameBytes + topicTable.count * 48 + historyLedger.frameBytes)
                // A compaction writes and syncs a whole new log: what this batch wrote is durable with it.
                if stateLog.wantsCompaction {
                    try compactState()
                } else if syncDue {
                    if stateSyncer != nil { return .syncing }
                    try stateLog.sync()
                }
            }
            return .committed
        } catch {
            noteStateNotSaved(error, now: now)
            return .failed
        }
    }

    /// Records that the log could not be written or synced: the next batches rewrite it, backing off.
    func noteStateNotSaved(_ error: any Error, now: UInt64) {
        let pause = journal.health.failed("\(error)", now: now)
        onEvent?(.stateNotSaved("\(error)", retryingIn: .microseconds(Int64(pause))))
    }

    /// Lets out the acknowledgements that waited for the commit, or, when it failed, withdraws them: what waited
    /// for such a session is dropped, and it is told why and closed, so that no `OK` stands for what is not in the
    /// log.
    func settleAcknowledgements(_ outcome: CommitOutcome) {
        guard !sessionsAwaitingCommit.isEmpty else {
            if outcome == .syncing { startSyncIfDue() }
            return
        }
        let sessions = sessionsAwaitingCommit
        sessionsAwaitingCommit.removeAll(keepingCapacity: true)
        for session in sessions { session.inCommitList = false }
        switch outcome {
        case .syncing: awaitSync(sessions)
        case .committed: settle(sessions, committed: true)
        case .failed: settle(sessions, committed: false)
        }
    }

    /// Lets out what `sessions` held for their acknowledgements (`committed`), or withdraws it: what waited is
    /// dropped, and each is told why and closed. A session still waiting for an earlier sync keeps waiting.
    func settle(_ sessions: [Session], committed: Bool) {
        for session in sessions {
            if committed, session.waitsForSync { continue }
            session.awaitsCommit = false
            guard let transport = session.transport else { continue }
            if committed {
                if transport.isWritable { drainOutbox(of: session, into: transport) }
                continue
            }
            discardOutbox(of: session)
            var error = allocator.buffer(capacity: 200)
            error.writeError(ProtocolError(
                .storage,
                "the daemon could not write its state log (\(stateProblem ?? "unknown")), so what it acknowledged on this"
                    + " connection in its last batch may not be saved; the connection is closed: check, and send again"
            ))
            transport.write(error)
            session.closesAfterFlush = true
            markForFlush(session)
        }
    }

    /// Holds what is sent to `session` from now on in this batch until the batch's records are in the log.
    func awaitCommit(_ session: Session) {
        guard journal.log != nil, !session.inCommitList else { return }
        if !session.awaitsCommit { writeSpan(of: session) }
        session.awaitsCommit = true
        session.inCommitList = true
        sessionsAwaitingCommit.append(session)
    }

    /// Rewrites the state log as the exact state now, compacted (see ``StateJournal/compact(topics:)``).
    func compactState() throws {
        settleHistory()
        try journal.compact(topics: topicTable)
    }

    /// The `ERR storage` for a change the state log must hold, while the log cannot be written: `consequence` says
    /// what that means for the request.
    func storageRefusal(_ consequence: String, id: UInt64?) -> ProtocolError? {
        guard journal.log != nil, let stateProblem else { return nil }
        return ProtocolError(.storage, "the daemon cannot write its state log (\(stateProblem)), so \(consequence)", requestID: id)
    }
}
