import NotifyProtocol
import NotifySystem

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Talks to systemd (or anything else that set `$NOTIFY_SOCKET`) as `sd_notify` does: readiness, status text,
/// reloading, stopping, watchdog pings. Without `$NOTIFY_SOCKET` every call does nothing, so the daemon runs the
/// same from a terminal.
struct ServiceManager: Sendable {
    private let notifier: ServiceNotifier
    /// How often systemd expects a watchdog ping, if it does (`WatchdogSec=`).
    let watchdogInterval: Duration?

    init() {
        notifier = ServiceNotifier()
        watchdogInterval = ServiceManager.watchdogInterval(
            microseconds: POSIX.environmentValue("WATCHDOG_USEC"),
            pid: POSIX.environmentValue("WATCHDOG_PID"),
            ownPID: getpid()
        )
    }

    /// Whether a service manager listens.
    var isPresent: Bool { notifier.isPresent }

    /// The watchdog's interval from `WATCHDOG_USEC`, as sd_watchdog_enabled(3) reads it: none when it is not set, not
    /// a positive number, or meant for another process (`WATCHDOG_PID`).
    static func watchdogInterval(microseconds: String?, pid: String?, ownPID: Int32) -> Duration? {
        guard let microseconds, let value = UInt64(microseconds), value > 0 else { return nil }
        if let pid, Int32(pid) != ownPID { return nil }
        // The environment's, so any number: a day is already far longer than a unit waits.
        return .microseconds(Int64(min(value, 86_400_000_000)))
    }

    /// The service is up: the socket listens and saved state is loaded.
    func ready(status: String) {
        send("READY=1\nSTATUS=\(status)\nMAINPID=\(getpid())")
    }

    /// The one-line state shown by `systemctl status`.
    func status(_ text: String) {
        send("STATUS=\(text)")
    }

    /// A reload started; `ready(status:)` ends it. systemd ≥ 253 wants the monotonic time of the request.
    func reloading() {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let microseconds = UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec / 1_000)
        send("RELOADING=1\nMONOTONIC_USEC=\(microseconds)\nSTATUS=reloading configuration")
    }

    /// Shutdown started.
    func stopping(status: String) {
        send("STOPPING=1\nSTATUS=\(status)")
    }

    /// The watchdog ping: proves the event loop still runs.
    func watchdog() {
        send("WATCHDOG=1")
    }

    private func send(_ state: String) {
        notifier.send(state)
    }
}
