import NIOCore
import NotifyProtocol

/// Each topic's history: what a publish leaves in it, and who pays for it (see ``TopicHistory`` and
/// ``HistoryLedger``).
extension Broker {
    /// The history limits of `state`, as the configuration in force says.
    func historyLimits(of state: TopicState) -> HistoryLimits {
        let generation = UInt32(truncatingIfNeeded: configurationGeneration)
        if state.historyRuleGeneration != generation {
            state.historyRule = configuration.historyRule(of: state.topic)
            state.historyRuleGeneration = generation
        }
        return configuration.historyLimits(rule: state.historyRule)
    }

    /// Notes the message just published (its frame in the batch, its line start `lineStart` bytes long) for its
    /// topic's history, charged to its publisher; ``settleHistory()`` takes it in. `previous`: the topic's number
    /// before it (one less, unless another host's message gave its own).
    /// - Returns: its index among the messages noted, or nil when its topic keeps no history.
    func recordHistory(
        _ frame: Range<Int>,
        lineStart: Int,
        of state: TopicState,
        sequence: UInt64,
        after previous: UInt64,
        time: PublishTime,
        payloadSize: Int,
        by owner: UserAccount
    ) -> Int? {
        if state.history == nil {
            guard !historyLimits(of: state).isOff else { return nil }
            // What the topic had before is history no longer held: the messages through `previous`, not the
            // numbers another host's message skipped (a topic first taken in at number 1,000 had none before).
            makeHistory(of: state, before: previous + 1, time: time)
        }
        let index = pendingHistory.messages.count
        pendingHistory.append(.init(
            topic: .passUnretained(state),
            frame: frame,
            sequence: sequence,
            time: time,
            payloadSize: payloadSize,
            owner: .passUnretained(owner),
            // A line start too long for a record's header (a topic name near 64 KiB) keeps the frame whole.
            lineStart: UInt16(exactly: lineStart) ?? 0
        ))
        journal.markHistoryUnlogged(state, through: sequence)
        return index
    }

    /// Takes the batch's messages noted so far into their topics' histories: those each history will still hold
    /// once all are in, counted against the budgets; the rest only as gone (see ``PendingHistory``). Runs before
    /// anything reads a history, before a topic is forgotten, and before the batch's buffer starts over.
    func settleHistory() {
        guard !pendingHistory.isEmpty else { return }
        let largestPayload = min(configuration.maxRetainedBytesPerUser, configuration.maxRetainedBytes)
        pendingHistory.decide(limits: { historyLimits(of: $0) }, largestPayload: largestPayload)
        for (index, message) in pendingHistory.messages.enumerated() {
            message.topic._withUnsafeGuaranteedRef { state in
                let kept = message.fate != .superseded && settle(message, of: state)
                if state.pendingRetained == index { settleRetained(message, kept: kept, of: state) }
            }
        }
        pendingHistory.removeAll()
    }

    /// Takes one message of the batch into `state`'s history, or notes it gone (see ``settleHistory()``).
    /// - Returns: whether the history took it in.
    private func settle(_ message: PendingHistory.Message, of state: TopicState) -> Bool {
        if message.fate == .passed {
            // It and everything before it are gone: the history starts again after it.
            makeHistory(of: state, before: message.firstGone, time: message.time)
            state.history!.skip(sequence: message.sequence, firstGone: message.firstGone, time: message.time) {
                historyLedger.released($0, from: state)
            }
            return false
        }
        // Borrowed, not retained: the account outlives the batch (see ``PendingHistory``), and a reference counted
        // per message is what settling in bulk is there to save.
        return message.owner._withUnsafeGuaranteedRef { owner in
            batch.withBytes(message.frame) { frame in
                keepInHistory(
                    frame,
                    lineStart: Int(message.lineStart),
                    of: state,
                    sequence: message.sequence,
                    time: message.time,
                    payloadSize: message.payloadSize,
                    by: owner,
                    limits: historyLimits(of: state)
                )
            }
        }
    }

    /// Settles `state`'s buffered message, `message` of the batch: the history's record from now on when the
    /// history took it in (`kept`), else a block of its own, copied from the batch while its bytes are still there.
    private func settleRetained(_ message: PendingHistory.Message, kept: Bool, of state: TopicState) {
        // Taken in, it is its history's newest record, unless a budget let it go at once (the ledger, which moves a
        // buffered message it lets go of into a block, does not know a pending one).
        if kept, state.history?.newestSequence == message.sequence { return state.retainInHistory(message.sequence) }
        let block = message.owner._withUnsafeGuaranteedRef { owner in
            batch.withBytes(message.frame) {
                RetainedMessage.make(frame: $0, payloadSize: message.payloadSize, sequence: message.sequence, owner: owner)
            }
        }
        state.retainInBlock(block)
    }

    /// Makes `state`'s history if it has none yet: what the topic had before `sequence` (at most one message per
    /// number), published no later than `time`, is history no longer held.
    private func makeHistory(of state: TopicState, before sequence: UInt64, time: PublishTime) {
        guard state.history == nil else { return }
        state.history = TopicHistory()
        if sequence > 1 { state.history!.noteEvicted(through: sequence - 1, messages: sequence - 1, time: time) }
    }

    /// Keeps a message in `state`'s history, charged to `owner`, within `limits` and the budgets.
    /// - Returns: whether it was kept.
    @discardableResult
    private func keepInHistory(
        _ frame: UnsafeRawBufferPointer,
        lineStart: Int,
        of state: TopicState,
        sequence: UInt64,
        time: PublishTime,
        payloadSize: Int,
        by owner: UserAccount,
        limits: HistoryLimits
    ) -> Bool {
        makeHistory(of: state, before: sequence, time: time)
        guard payloadSize <= min(configuration.maxRetainedBytesPerUser, configuration.maxRetainedBytes) else {
            // No budget takes it: it is skipped, and the history starts again after it.
            state.history!.skip(sequence: sequence, time: time) { historyLedger.released($0, from: state) }
            return false
        }
        assert(
            lineStart == 0 || lineStart == TopicHistory.lineStart(of: frame, topic: state.topic.name, sequence: sequence, time: time),
            "a frame's line start is not what the daemon writes for its topic, number and time"
        )
        let kept = state.history!.append(
            frame,
            lineStart: lineStart,
            sequence: sequence,
            time: time,
            payloadSize: payloadSize,
            owner: owner,
            limits: limits
        ) { historyLedger.released($0, from: state) }
        guard kept else { return false }
        historyLedger.kept(sequence, payloadSize: payloadSize, frameSize: frame.count, in: state, by: owner)
        historyLedger.trim(for: owner, maxPerUser: configuration.maxRetainedBytesPerUser, maxTotal: configuration.maxRetainedBytes)
        return true
    }

    /// Applies the history limits and budgets of a new configuration to the histories kept: a history turned off is
    /// let go of, one over its new limits or over the new budgets loses its oldest messages. A reload is rare, so
    /// walking every topic then is fine.
    func applyHistoryLimits() {
        for state in topicTable.all where state.history != nil {
            let limits = historyLimits(of: state)
            if limits.isOff {
                historyLedger.forget(state)
                continue
            }
            while let history = state.history, !history.isEmpty, history.count > limits.messages || history.bytes > limits.bytes {
                historyLedger.released(state.history!.removeOldest()!, from: state)
            }
        }
        // By uid, so that what a reload lets go does not depend on a dictionary's order: one uid's oldest run in a
        // topic may take another's older messages of that topic with it.
        historyLedger.trim(
            forAll: connections.accounts.values.sorted { $0.uid < $1.uid },
            maxPerUser: configuration.maxRetainedBytesPerUser,
            maxTotal: configuration.maxRetainedBytes
        )
    }

    /// Restores `state`'s history from the log's frames, oldest first, within the limits and budgets in force.
    ///
    /// Only the newest unbroken run of numbers is kept: a topic forgotten and numbered again from 1, or records lost
    /// to damage, leave a log whose frames go back or skip, and a history must be one run for a resume to be told
    /// exactly what it misses.
    /// - Returns: the indices in `frames` of the messages the history holds now.
    @discardableResult
    func restoreHistory(_ frames: [ByteBuffer], of state: TopicState, decoder: inout ServerFrameDecoder) -> [Int] {
        let limits = historyLimits(of: state)
        guard !limits.isOff else { return [] }
        var run: [(index: Int, delivery: Delivery)] = []
        // Messages of the runs before the newest: gone, and counted as gone (a resume from before them is told).
        var earlierRuns: UInt64 = 0
        for (index, frame) in frames.enumerated() {
            var input = frame
            guard case .delivery(let delivery)? = try? decoder.decode(buffer: &input) else { continue }
            if let last = run.last, delivery.sequence != last.delivery.sequence + 1 {
                earlierRuns += UInt64(run.count)
                run.removeAll()
            }
            run.append((index, delivery))
        }
        // Only the newest can stay: the rest would be let go again at once.
        let kept = run.suffix(limits.messages)
        for (index, delivery) in kept {
            let owner = account(charging: delivery.publisher)
            _ = frames[index].withUnsafeReadableBytes {
                keepInHistory(
                    $0,
                    lineStart: TopicHistory.lineStart(of: $0, topic: state.topic.name, sequence: delivery.sequence, time: delivery.time),
                    of: state,
                    sequence: delivery.sequence,
                    time: delivery.time,
                    payloadSize: delivery.payload.readableBytes,
                    by: owner,
                    limits: limits
                )
            }
            state.lastPublished = max(state.lastPublished ?? delivery.time, delivery.time)
        }
        guard let history = state.history else { return [] }
        history.countEvicted(earlierRuns)
        // What it restored is in the log already.
        history.loggedThrough = history.newestSequence ?? 0
        return kept.filter { history.contains($0.delivery.sequence) }.map(\.index)
    }
}

extension Broker {
    /// Sends a subscription that resumes (`SUB … since=`) what the history of each topic it matches holds after
    /// `since`, as `LAST` frames with the request's id, each topic's preceded by a `DROP` notice of what its history
    /// no longer holds. Nothing runs between this and the `OK`, so live messages follow without a gap or a repeat.
    func replayHistory(matching pattern: TopicPattern, since: ResumePoint, id: UInt64?, to target: SubscriberTarget) {
        let peer = target.session.peer
        switch since {
        case .sequence(let point):
            // A name: the decoder refuses a sequence number for a pattern with wildcards.
            guard let state = topicTable[pattern.text] else {
                return noticeForgotten(pattern.text, after: point, id: id, to: target.session)
            }
            // A point past the topic's number: it was numbered again from 1 since (its state was lost, or it was
            // forgotten longer ago than the daemon remembers), and all it has now is new to the subscriber.
            if point > state.sequence { noticeUnremembered(id: id, to: target.session) }
            if point == 0 { noticeMissedImports(for: pattern, id: id, to: target.session) }
            let after = point > state.sequence ? 0 : point
            guard after < state.sequence else { return }
            replayHistory(of: state, id: id, to: target) { history, body in
                var lastMissed = (history?.firstSequence(after: after) ?? state.sequence + 1) - 1
                var most = UInt64.max
                if let history {
                    // Past the newest message the history let go of, a number it does not hold was never a message
                    // here (another host's numbering, taken on): what is missed is what it let go of, counted.
                    lastMissed = min(lastMissed, history.lastEvicted?.sequence ?? 0)
                    most = history.evictedMessages
                }
                if lastMissed > after { noticeMissed((after + 1)...lastMissed, of: state.topic, .history, atMost: most, id: id, to: target.session) }
                history?.forEach(after: after, topic: state.topic.name, body)
            }
        case .time(let time):
            // Notices are replies, which are never dropped: past a bound, one about many topics counts the rest.
            var notices = 0
            var othersMissed: UInt64 = 0
            var othersReason = DropReason.history
            let notice = { (missed: ClosedRange<UInt64>, most: UInt64, topic: Topic, reason: DropReason) in
                notices += 1
                if notices <= DropTally.topicLimit {
                    self.noticeMissed(missed, of: topic, reason, atMost: most, id: id, to: target.session)
                } else {
                    othersMissed = othersMissed.saturatingAdd(min(missed.size, most))
                    othersReason = reason
                }
            }
            workDone &+= topicTable.forEach(matching: pattern) { state in
                guard configuration.accessPolicy.allows(.read, topic: state.topic, peer: peer) else { return }
                replayHistory(of: state, id: id, to: target) { history, body in
                    // Which of the messages it no longer holds came after `time` it cannot tell: all are announced.
                    if let history, let evicted = history.lastEvicted, evicted.time > time, history.evictedMessages > 0 {
                        // The run ends at the newest it let go of; where it starts is not kept, only how many left:
                        // the first number is the one it would be had the numbers not jumped.
                        let count = min(history.evictedMessages, evicted.sequence)
                        notice((evicted.sequence - count + 1)...evicted.sequence, count, state.topic, .history)
                    } else if history == nil, state.sequence > 0, (state.lastPublished ?? .distantFuture) > time {
                        // No history: it cannot replay a thing, and without a time (after a restart) may have missed all.
                        notice(1...state.sequence, .max, state.topic, .history)
                    }
                    history?.forEach(after: time, topic: state.topic.name, body)
                }
            }
            if !topicTable.forgottenTopics.isEmpty {
                // Topics forgotten to make room (max-topics): all they had may be what the subscriber missed.
                let forgotten = topicTable.forgottenTopics
                workDone &+= forgotten.forEach(matching: pattern) { topic, entry in
                    guard entry.newest > time, configuration.accessPolicy.allows(.read, topic: topic, peer: peer) else { return }
                    notice(1...entry.sequence, .max, topic, .forgotten)
                }
                if forgotten.unremembered.newest > time {
                    othersMissed = othersMissed.saturatingAdd(forgotten.unremembered.messages)
                    othersReason = .forgotten
                }
            }
            if othersMissed > 0 { noticeMissed(count: othersMissed, othersReason, id: id, to: target.session) }
            if fleet.missedImportsNewest > time { noticeMissedImports(for: pattern, id: id, to: target.session) }
        }
    }

    /// Tells a subscriber resuming from before it that messages of other hosts were lost before this daemon took them
    /// in (``announceMissedImports(count:)``): which topics they were of it cannot tell. Never for a pattern of this
    /// host's own topics (`$…`, `user.…`), which no other host's message can be of.
    private func noticeMissedImports(for pattern: TopicPattern, id: UInt64?, to session: Session) {
        guard let missed = fleet.missedImports, !pattern.text.hasPrefix("$"), !pattern.text.hasPrefix("user.") else { return }
        noticeMissed(count: missed, .fleet, id: id, to: session)
    }

    /// Tells a subscriber resuming `name` after `point`, a topic the daemon does not have, what it missed if the
    /// topic was forgotten to make room: its messages after the point (or, forgotten longer ago than the daemon
    /// remembers names, every message of forgotten topics it no longer remembers).
    private func noticeForgotten(_ name: String, after point: UInt64, id: UInt64?, to session: Session) {
        guard !topicTable.forgottenTopics.isEmpty else { return }
        if let entry = topicTable.forgottenTopics[name] {
            guard point < entry.sequence, let topic = try? Topic(name) else { return }
            noticeMissed((point + 1)...entry.sequence, of: topic, .forgotten, id: id, to: session)
        } else if point > 0 {
            noticeUnremembered(id: id, to: session)
        }
    }

    /// Tells a resuming subscriber that topics the daemon forgot, and no longer remembers by name, had messages it
    /// may have missed: a `DROP` about many topics, when there were any.
    private func noticeUnremembered(id: UInt64?, to session: Session) {
        let messages = topicTable.forgottenTopics.unremembered.messages
        if messages > 0 { noticeMissed(count: messages, .forgotten, id: id, to: session) }
    }

    /// Runs `replay` with the topic's history and a function that sends one of its messages.
    private func replayHistory(
        of state: TopicState,
        id: UInt64?,
        to target: SubscriberTarget,
        _ replay: (TopicHistory?, (TopicHistory.Entry, UnsafeRawBufferPointer) -> Void) -> Void
    ) {
        replay(state.history) { entry, frame in
            workDone &+= 1
            let last = lastFrame(id: id, messageFrame: frame)
            self.replay(last, of: state, sequence: entry.sequence, payloadSize: entry.payloadSize, to: target)
        }
    }

    /// Tells a resuming subscriber that the messages `missed` of `topic` are not in its history, `most` of them at
    /// most (some numbers of the run may never have been messages here): a `DROP` with the `SUB`'s id, so that a
    /// client hands it to the subscription that asked.
    private func noticeMissed(_ missed: ClosedRange<UInt64>, of topic: Topic, _ reason: DropReason, atMost most: UInt64 = .max, id: UInt64?, to session: Session) {
        let count = min(missed.size, most)
        let dropped = DropNotice(topic: topic, count: count, firstSequence: missed.lowerBound, lastSequence: missed.upperBound, reason: reason)
        noticeMissed(dropped, id: id, to: session)
    }

    /// The same about `count` messages of topics past the bound on notices (``DropNotice/manyTopics``).
    private func noticeMissed(count: UInt64, _ reason: DropReason, id: UInt64?, to session: Session) {
        noticeMissed(DropNotice(topic: DropNotice.manyTopics, count: count, firstSequence: 0, lastSequence: 0, reason: reason), id: id, to: session)
    }

    func noticeMissed(_ dropped: DropNotice, id: UInt64?, to session: Session) {
        var notice = allocator.buffer(capacity: 64)
        notice.writeDropNotice(dropped, requestID: id)
        queue(notice, to: session)
    }
}
