import NIOCore

/// Each topic's history: what a publish leaves in it, and who pays for it (see ``TopicHistory`` and
/// ``HistoryLedger``).
extension Broker {
    /// The history limits of `state`, as the configuration in force says.
    func historyLimits(of state: TopicState) -> HistoryLimits {
        if state.historyLimitsGeneration != configurationGeneration {
            state.historyLimits = configuration.historyLimits(of: state.topic)
            state.historyLimitsGeneration = configurationGeneration
        }
        return state.historyLimits
    }

    /// Keeps the message just published (its frame in the batch) in its topic's history, counted against its
    /// publisher's budget and the daemon's; past either, the oldest history leaves.
    func recordHistory(_ frame: Range<Int>, of state: TopicState, sequence: UInt64, time: PublishTime, payloadSize: Int, by owner: UserAccount) {
        let limits = historyLimits(of: state)
        if limits.isOff && state.history == nil { return }
        if state.history == nil { state.history = TopicHistory(allocator: allocator) }
        let kept = batch.withBytes(frame) { bytes in
            keepInHistory(bytes, of: state, sequence: sequence, time: time, payloadSize: payloadSize, by: owner, limits: limits)
        }
        guard let stateLog else { return }
        // Every message a history keeps is in the log before anyone is sent it, and one it skips leaves its number
        // there: after a crash the topic goes on from its last number exactly, with no gap a resuming subscriber
        // would be told of for nothing.
        if kept {
            batch.withBytes(frame) { stateLog.appendHistory($0) }
        } else {
            stateLog.appendSequence(state.topic.name, sequence)
        }
        state.persistedSequence = max(state.persistedSequence, sequence)
    }

    /// Keeps a message in `state`'s history, charged to `owner`, within `limits` and the budgets.
    /// - Returns: whether it was kept.
    @discardableResult
    private func keepInHistory(
        _ frame: UnsafeRawBufferPointer,
        of state: TopicState,
        sequence: UInt64,
        time: PublishTime,
        payloadSize: Int,
        by owner: UserAccount,
        limits: HistoryLimits
    ) -> Bool {
        if state.history == nil { state.history = TopicHistory(allocator: allocator) }
        guard payloadSize <= min(configuration.maxRetainedBytesPerUser, configuration.maxRetainedBytes) else {
            // No budget takes it: it is skipped, and the history starts again after it.
            state.history!.skip(sequence: sequence, time: time) { historyLedger.released($0) }
            return false
        }
        let kept = state.history!.append(
            frame,
            sequence: sequence,
            time: time,
            payloadSize: payloadSize,
            owner: owner,
            limits: limits
        ) { historyLedger.released($0) }
        guard kept else { return false }
        historyLedger.kept(sequence, payloadSize: payloadSize, frameSize: frame.count, in: state, by: owner)
        historyLedger.trim(for: owner, maxPerUser: configuration.maxRetainedBytesPerUser, maxTotal: configuration.maxRetainedBytes)
        return true
    }

    /// Restores `state`'s history from the log's frames, oldest first, within the limits and budgets in force.
    func restoreHistory(_ frames: [ByteBuffer], of state: TopicState, decoder: inout ServerFrameDecoder) {
        let limits = historyLimits(of: state)
        guard !limits.isOff else { return }
        // Only the newest can stay: the rest would be let go again at once.
        for frame in frames.suffix(limits.messages) {
            var input = frame
            guard case .delivery(let delivery)? = try? decoder.decode(buffer: &input) else { continue }
            let owner = account(of: delivery.publisher.uid)
            _ = frame.withUnsafeReadableBytes {
                keepInHistory(
                    $0,
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
    }
}

extension Broker {
    /// Sends a subscription that resumes (`SUB … since=`) what the history of each topic it matches holds after
    /// `since`, as `LAST` frames with the request's id, each topic's preceded by a `DROP` notice of what its history
    /// no longer holds. Nothing runs between this and the `OK`, so live messages follow without a gap or a repeat.
    func replayHistory(matching pattern: TopicPattern, since: ResumePoint, id: UInt64?, to target: SubscriberTarget) {
        let peer = target.session.peer
        switch since {
        case .sequence(let after):
            // A name: the decoder refuses a sequence number for a pattern with wildcards.
            guard let state = topicTable[pattern.text], after < state.sequence else { return }
            replayHistory(of: state, id: id, to: target) { history, body in
                let lastMissed = (history?.firstSequence(after: after) ?? state.sequence + 1) - 1
                if lastMissed > after { noticeMissed((after + 1)...lastMissed, of: state.topic, id: id, to: target.session) }
                history?.forEach(after: after, body)
            }
        case .time(let time):
            workDone &+= topicTable.forEach(matching: pattern) { state in
                guard configuration.accessPolicy.allows(.read, topic: state.topic, peer: peer) else { return }
                replayHistory(of: state, id: id, to: target) { history, body in
                    // Which of the messages it no longer holds came after `time` it cannot tell: all are announced.
                    if let history, let evicted = history.lastEvicted, evicted.time > time {
                        noticeMissed(history.firstEvicted...evicted.sequence, of: state.topic, id: id, to: target.session)
                    } else if history == nil, let last = state.lastPublished, last > time, state.sequence > 0 {
                        noticeMissed(1...state.sequence, of: state.topic, id: id, to: target.session)
                    }
                    history?.forEach(after: time, body)
                }
            }
        }
    }

    /// Runs `replay` with the topic's history and a function that sends one of its messages.
    private func replayHistory(
        of state: TopicState,
        id: UInt64?,
        to target: SubscriberTarget,
        _ replay: (TopicHistory?, (TopicHistory.Entry, ByteBuffer) -> Void) -> Void
    ) {
        replay(state.history) { entry, frame in
            let last = lastFrame(id: id, messageFrame: frame)
            self.replay(last, of: state, sequence: entry.sequence, payloadSize: entry.payloadSize, to: target)
        }
    }

    /// Tells a resuming subscriber that the messages `missed` of `topic` are not in its history: a `DROP` with the
    /// `SUB`'s id, so that a client hands it to the subscription that asked.
    private func noticeMissed(_ missed: ClosedRange<UInt64>, of topic: Topic, id: UInt64?, to session: Session) {
        var notice = allocator.buffer(capacity: 64)
        let dropped = DropNotice(topic: topic, count: UInt64(missed.count), firstSequence: missed.lowerBound, lastSequence: missed.upperBound)
        notice.writeDropNotice(dropped, requestID: id)
        queue(notice, to: session)
    }
}
