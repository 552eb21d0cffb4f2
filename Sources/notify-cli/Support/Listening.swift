import NotifyBus
import NotifySystem

/// Bounds on how long a command listens.
enum Listening {
    /// The longest `--timeout` or `--time-limit` taken, in seconds (about 31 years): past it, or for one that is not a
    /// number, a duration in milliseconds would not fit 64 bits.
    static let longestWait: Double = 1e9
}

/// How a command that waits for messages (`subscribe`, `wait`) came to an end.
enum ListeningOutcome {
    /// The body returned: it had what it waited for.
    case finished
    /// `--timeout` ran out first.
    case timedOut
    /// Nobody reads standard output any more (`notify subscribe … | head -1`, once `head` has its line).
    case outputClosed
}

/// Runs `body` until it returns, until `seconds` have passed, or (with `watchingOutput`) until the reader of
/// standard output goes away, whichever comes first; the others are cancelled.
///
/// Without the last, a subscriber piped into `head -1` would only learn that its reader left when the next message
/// failed to write, which may be never.
func listen(
    timeout seconds: Double?,
    watchingOutput: Bool,
    _ body: @escaping @Sendable () async throws -> Void
) async throws -> ListeningOutcome {
    try await withThrowingTaskGroup(of: ListeningOutcome.self) { group in
        group.addTask {
            try await body()
            return .finished
        }
        if let seconds {
            group.addTask {
                try await Task.sleep(for: .milliseconds(Int64(seconds * 1000)))
                return .timedOut
            }
        }
        if watchingOutput {
            group.addTask {
                await StandardOutput.readerDeparture()
            // Cancelled rather than departed: report nothing, the other outcome is the one that counts.
                try Task.checkCancellation()
                return .outputClosed
            }
        }
        let first = try await group.next()!
        group.cancelAll()
        return first
    }
}

/// Tells the user, on standard error, that a reconnecting subscription lost its connection or resumed.
@Sendable
func reportConnectionChange(_ change: ResumingSubscription.ConnectionChange) {
    switch change {
    case .lost(let error):
        StandardError.writeLine("notify: \(error.message); reconnecting (--no-reconnect to stop instead)")
    case .resumed:
        StandardError.writeLine("notify: reconnected; resumed from the daemon's history")
    }
}
