import NIOCore

/// Which server of the list the bridge uses or tries, and how long it waits before the next: the list is tried in
/// turn, and the wait doubles from ``firstRetryDelay`` up to ``longestRetryDelay`` while none answers, so that a
/// cluster that is down is not hammered and one that comes back is used again within seconds.
///
/// A value the bridge owns on its event loop; the bridge connects, schedules and logs, this only decides.
struct ServerRotation {
    static let firstRetryDelay = TimeAmount.milliseconds(100)
    static let longestRetryDelay = TimeAmount.seconds(5)
    /// A connection that lasted less than this did not end the run of failures: the backoff goes on growing (a
    /// server that takes connections and drops them must not be hammered).
    static let stableConnection = TimeAmount.seconds(10)

    /// Grows by one per attempt; the server is this modulo the list's length.
    private var index = 0
    private var retryDelay = Self.firstRetryDelay
    private var connectedAt = NIODeadline.now()
    /// Failed connection attempts since the last success, to log the first of a run and not every one.
    private(set) var failedAttempts = 0
    /// The last refusal of a login's sentence, while no login has succeeded since: shown on `STATUS=`.
    private(set) var loginRefused: String?

    /// The server of `servers` (the settings' list, never empty) being used or tried now.
    func current(of servers: [BridgeSettings.Server]) -> BridgeSettings.Server { servers[index % servers.count] }

    /// Where the current server is in a list of `count`, from 1 (`nats_server`).
    func position(among count: Int) -> Int { index % count + 1 }

    /// Settings that need a new connection (another list, say): the first server is tried next. The backoff and
    /// the run of failures go on.
    mutating func startOver() {
        index = 0
    }

    /// A connection was made at `now`: the run of failures, and any refused login, are over.
    mutating func connected(at now: NIODeadline) {
        failedAttempts = 0
        loginRefused = nil
        connectedAt = now
    }

    /// The connection made last ended at `now`: the backoff starts again from the shortest wait only if it lasted
    /// ``stableConnection``.
    mutating func disconnected(at now: NIODeadline) {
        if now - connectedAt >= Self.stableConnection { retryDelay = Self.firstRetryDelay }
    }

    /// An attempt to connect failed.
    mutating func attemptFailed() {
        failedAttempts += 1
    }

    /// `server` refused the login: said on `STATUS=` until a login succeeds.
    mutating func refusedLogin(by server: BridgeSettings.Server) {
        loginRefused = "NATS LOGIN REFUSED by \(server)"
    }

    /// Whether the journal hears of the failure just noted: the first of a run and every hundredth, not each one
    /// of an outage that lasts.
    var failureIsWorthLogging: Bool { failedAttempts <= 1 || failedAttempts % 100 == 0 }

    /// Moves on to the next server and returns how long to wait before trying it; the wait after it doubles, up to
    /// ``longestRetryDelay``.
    mutating func next() -> TimeAmount {
        index += 1
        let delay = retryDelay
        retryDelay = min(retryDelay * 2, Self.longestRetryDelay)
        return delay
    }
}
