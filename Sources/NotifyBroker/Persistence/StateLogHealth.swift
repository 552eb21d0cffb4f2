/// Whether the state log can be written, and when to try again when it cannot: each failure to write or sync it
/// makes the next batches rewrite the whole log from memory, no sooner than a pause that doubles from
/// ``firstPause`` up to ``longestPause``, so that a full disk costs a rewrite of the whole state at most that often
/// and a disk given room again is used again within it. A value the broker owns; the broker does the writing.
struct StateLogHealth {
    /// The pause before the first rewrite of a log that could not be written, in microseconds.
    static let firstPause: UInt64 = 100_000
    /// The longest pause between two rewrites (half a minute, in microseconds).
    static let longestPause: UInt64 = 30_000_000

    /// Why the log cannot be written, while it cannot: retained publishes are refused meanwhile.
    private(set) var problem: String?
    /// Times the log could not be written or synced since the broker started (`state_log_failures`).
    private(set) var failures: UInt64 = 0
    /// Whether the next batch must rewrite the log from memory rather than append to it.
    private(set) var needsRewrite = false
    private var retryTime: UInt64 = 0
    private var retryDelay: UInt64 = 0

    /// Notes a failure at `now` (microseconds) and returns the pause before the rewrite that will try again.
    mutating func failed(_ problem: String, now: UInt64) -> UInt64 {
        failures += 1
        needsRewrite = true
        self.problem = problem
        retryDelay = min(max(2 * retryDelay, Self.firstPause), Self.longestPause)
        retryTime = now + retryDelay
        return retryDelay
    }

    /// Whether the pause before a rewrite has passed at `now`.
    func mayRewrite(now: UInt64) -> Bool {
        now >= retryTime
    }

    /// Notes that the log was rewritten whole: it is written to as before, and the next failure pauses from the
    /// start.
    mutating func rewritten() {
        needsRewrite = false
        problem = nil
        retryDelay = 0
    }
}
