import NIOCore

/// Lets at most `burst` records of one kind through per `window`, so a client that repeats a refused request in a
/// loop cannot flood the journal; the next record that passes says how many were held back.
///
/// Used on the event loop only.
struct EventRateLimiter {
    let burst: Int
    let window: TimeAmount
    private var windowStart: [DaemonEvent: NIODeadline] = [:]
    private var passed: [DaemonEvent: Int] = [:]
    private var suppressed: [DaemonEvent: Int] = [:]

    init(burst: Int = 10, window: TimeAmount = .seconds(10)) {
        self.burst = burst
        self.window = window
    }

    /// Whether a record of `event` may be logged now, and how many were suppressed before it.
    mutating func admit(_ event: DaemonEvent, now: NIODeadline = .now()) -> (admitted: Bool, suppressedBefore: Int) {
        if let start = windowStart[event], now - start < window {
            if passed[event, default: 0] >= burst {
                suppressed[event, default: 0] += 1
                return (false, 0)
            }
        } else {
            windowStart[event] = now
            passed[event] = 0
        }
        passed[event, default: 0] += 1
        let held = suppressed.removeValue(forKey: event) ?? 0
        return (true, held)
    }
}
