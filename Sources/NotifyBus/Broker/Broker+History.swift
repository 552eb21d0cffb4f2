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
