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
        let kept: Bool
        if payloadSize > min(configuration.maxRetainedBytesPerUser, configuration.maxRetainedBytes) {
            // No budget takes it: it is skipped, and the history starts again after it.
            state.history!.skip(sequence: sequence, time: time) { historyLedger.released($0) }
            kept = false
        } else {
            kept = batch.withBytes(frame) { bytes in
                state.history!.append(
                    bytes,
                    sequence: sequence,
                    time: time,
                    payloadSize: payloadSize,
                    owner: owner,
                    limits: limits
                ) { historyLedger.released($0) }
            }
        }
        if kept {
            historyLedger.kept(sequence, payloadSize: payloadSize, in: state, by: owner)
            historyLedger.trim(
                for: owner,
                maxPerUser: configuration.maxRetainedBytesPerUser,
                maxTotal: configuration.maxRetainedBytes
            )
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
            let verbLength = 3  // "MSG": a LAST frame is the MSG frame with the request's id and another verb
            var last = lastHeader(id: id, capacity: 28 + frame.readableBytes)
            last.writeBytes(frame.readableBytesView.dropFirst(verbLength))
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
