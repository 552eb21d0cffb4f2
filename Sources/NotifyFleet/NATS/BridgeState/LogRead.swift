import NIOCore

/// A read of the log under way on the current connection: every origin's part of it (catch-up, `host` nil) or one
/// origin's (a repair), one record per direct get, in the stream's order.
///
/// A class: a direct get's answer comes back to the read that asked, and is dropped when that read was let go of
/// meanwhile (``LogReads`` then holds another, or none, under its key).
final class LogRead {
    /// A read that finds nothing asks again after a pause that doubles from ``firstPollDelay`` up to
    /// ``longestPollDelay``: the record it waits for is usually appended within milliseconds.
    static let firstPollDelay = TimeAmount.milliseconds(5)
    static let longestPollDelay = TimeAmount.milliseconds(250)
    /// Direct gets that fail in a row before the read gives up.
    static let failureLimit = 3

    let host: String?
    /// The stream sequence to ask for next: the first record at or after it.
    var next: UInt64
    /// When the read last brought something this host lacked: a repair that brings nothing for long enough gives up.
    private(set) var idleSince: NIODeadline
    private var pollDelay = LogRead.firstPollDelay
    /// Direct gets that failed since the last that answered.
    private(set) var failures = 0

    init(host: String?, next: UInt64, now: NIODeadline = .now()) {
        self.host = host
        self.next = next
        idleSince = now
    }

    /// The read's key in ``LogReads``: "" for catch-up, the origin for a repair.
    var key: String { host ?? "" }

    /// The read brought something this host lacked at `now`: it is not idle, and polls quickly again.
    func broughtSomething(at now: NIODeadline = .now()) {
        idleSince = now
        pollDelay = Self.firstPollDelay
    }

    /// Whether the read has brought nothing for `patience` at `now`.
    func hasWaited(_ patience: TimeAmount, at now: NIODeadline = .now()) -> Bool { now - idleSince >= patience }

    /// Starts the wait for `patience` again from `now` (the log is asked whether what is missing is gone for good).
    func waitAgain(from now: NIODeadline = .now()) {
        idleSince = now
    }

    /// The pause before asking again for a record not there yet; the one after it is twice as long, up to the
    /// longest.
    func nextPollDelay() -> TimeAmount {
        let delay = pollDelay
        pollDelay = min(pollDelay * 2, Self.longestPollDelay)
        return delay
    }

    /// A direct get answered.
    func answered() {
        failures = 0
    }

    /// A direct get failed.
    func failed() {
        failures += 1
    }

    /// Whether the read has failed ``failureLimit`` times in a row, and gives up.
    var hasFailedTooOften: Bool { failures >= Self.failureLimit }
}
