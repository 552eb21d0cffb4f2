import NotifyProtocol

/// What the broker owes its state log: which topics' buffered messages and histories changed in this batch, and
/// whether the log can be written at all. The broker marks a topic as a publish changes it; the journal writes each
/// marked topic's final state once, at the batch's end, so a topic published to a thousand times in one read batch
/// costs the log one record, not a thousand.
///
/// It holds no sessions and sends nothing: the broker decides what an acknowledgement waits for (Broker+Persistence)
/// and when a sync runs (``GroupCommit``).
struct StateJournal {
    /// The log, once attached (``Broker/attach(_:restoring:)``); nil: the broker keeps nothing across a restart.
    var log: StateLog?
    /// Whether the log can be written, and when a rewrite tries again when it cannot.
    var health = StateLogHealth()
    /// Topics whose buffered message changed in this batch (each marked ``TopicState/isUnsaved``).
    private(set) var unsavedTopics: [TopicState] = []
    /// Topics whose history kept messages in this batch (each marked ``TopicState/historyIsUnlogged``): what each
    /// still holds at the batch's end is logged then, so a burst that runs through a history many times over costs
    /// the log one history's worth.
    private(set) var unloggedHistories: [TopicState] = []

    /// Notes that `state`'s buffered message changed, to be logged at the end of the batch.
    @inline(__always)
    mutating func markUnsaved(_ state: TopicState) {
        guard log != nil, !state.isUnsaved else { return }
        state.isUnsaved = true
        unsavedTopics.append(state)
    }

    /// Notes that `state`'s history kept message `sequence`, to be logged at the end of the batch.
    mutating func markHistoryUnlogged(_ state: TopicState, through sequence: UInt64) {
        // While the log cannot be written, the rewrite that mends it writes every history whole: noting each
        // message meanwhile would only pile up in memory.
        guard log != nil, !health.needsRewrite else { return }
        // The commit logs it, or the number of the last message the history skipped.
        state.persistedSequence = max(state.persistedSequence, sequence)
        if !state.historyIsUnlogged {
            state.historyIsUnlogged = true
            unloggedHistories.append(state)
        }
    }

    /// Appends to the log the final state of each topic marked in this batch: first what each history kept and still
    /// holds (and the number of each topic's last message if its history skipped it), then each changed buffered
    /// message, as a mark on its history's record when that record is in the log already.
    ///
    /// Every message a history keeps is in the log before anyone is sent it, and after a crash the topic goes on
    /// from its last number exactly, with no gap a resuming subscriber would be told of for nothing. What a history
    /// let go of within the batch is not logged at all. The broker settles its pending history first.
    mutating func appendMarked() {
        guard let log else { return }
        appendUnloggedHistories(to: log)
        for state in unsavedTopics {
            state.isUnsaved = false
            if state.retainedInHistory != 0, let history = state.history, history.loggedThrough >= state.retainedInHistory {
                // Its record is in the log already (above): it is only marked. (Not while the log awaits a rewrite,
                // which logs no history record: then the message is written whole.)
                log.appendRetainedInHistory(state.topic.name, state.retainedInHistory)
            } else if let retained = state.retained {
                retained.withFrame { log.appendRetained($0) }
            } else {
                log.appendCleared(state.topic.name)
            }
        }
        unsavedTopics.removeAll(keepingCapacity: true)
    }

    private mutating func appendUnloggedHistories(to log: StateLog) {
        for state in unloggedHistories {
            var newest: UInt64 = 0
            state.historyIsUnlogged = false
            if let history = state.history {
                newest = history.loggedThrough
                let name = state.topic.name
                history.forEachEntry(after: newest) { entry in
                    // Written into the log's buffer from the ring, not put together in a copy first.
                    log.appendHistory { history.writeFrame(of: entry, topic: name, into: &$0) }
                    newest = entry.sequence
                }
                history.loggedThrough = newest
            }
            // A history let go of since (turned off, say) logs its topic's number all the same.
            if newest < state.sequence { log.appendSequence(state.topic.name, state.sequence) }
        }
        unloggedHistories.removeAll(keepingCapacity: true)
    }

    /// Rewrites the log as the exact state of `topics`, compacted: what was marked is in it, so the marks are dropped.
    /// The broker settles its pending history first.
    mutating func compact(topics: TopicTable) throws {
        guard let log else { return }
        for state in unsavedTopics { state.isUnsaved = false }
        unsavedTopics.removeAll(keepingCapacity: true)
        for state in unloggedHistories { state.historyIsUnlogged = false }
        unloggedHistories.removeAll(keepingCapacity: true)
        try log.compact { snapshot in
            for state in topics.all {
                state.history?.forEach(last: nil, topic: state.topic.name) { _, frame in snapshot.appendHistory(frame) }
                if state.retainedInHistory != 0 {
                    snapshot.appendRetainedInHistory(state.topic.name, state.retainedInHistory)
                } else {
                    state.retained?.withFrame { snapshot.appendRetained($0) }
                }
                snapshot.appendSequence(state.topic.name, state.sequence)
            }
            // A topic forgotten to make room is remembered across a restart, with its number and last time.
            let forgotten = topics.forgottenTopics
            forgotten.forEachEntry { name, entry in snapshot.appendForgotten(name, entry.sequence, entry.newest) }
            if forgotten.unremembered.messages > 0 {
                snapshot.appendForgotten(ForgottenTopics.unrememberedName, forgotten.unremembered.messages, forgotten.unremembered.newest)
            }
        }
        for state in topics.all {
            state.persistedSequence = state.sequence
            if state.history != nil { state.history!.loggedThrough = state.history!.newestSequence ?? 0 }
        }
    }
}
