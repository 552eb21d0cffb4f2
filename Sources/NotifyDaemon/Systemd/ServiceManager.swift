import CSystemd
import NotifyProtocol
import NotifySystem

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Talks to systemd (or anything else that set `$NOTIFY_SOCKET`) through `sd_notify`: readiness, status text,
/// reloading, stopping, watchdog pings. Without `$NOTIFY_SOCKET` every call does nothing, so the daemon runs the
/// same from a terminal.
struct ServiceManager: Sendable {
    /// Whether a service manager listens.
    let isPresent: Bool
    /// How often systemd expects a watchdog ping, if it does (`WatchdogSec=`).
    let watchdogInterval: Duration?

    init() {
        isPresent = POSIX.environmentValue("NOTIFY_SOCKET") != nil
        var microseconds: UInt64 = 0
        if sd_watchdog_enabled(0, &microseconds) > 0 && microseconds > 0 {
            // WATCHDOG_USEC is the environment's, so any number: a day is already far longer than a unit waits.
            watchdogInterval = .microseconds(Int64(min(microseconds, 86_400_000_000)))
        } else {
            watchdogInterval = nil
        }
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
        guard isPresent else { return }
        _ = sd_notify(0, state)
    }
}
