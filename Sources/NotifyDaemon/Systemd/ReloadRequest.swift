import NotifyProtocol

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// `notifyd --reload`: asks the notifyd on a socket to read its configuration again and waits until it has, for
/// `ExecReload=`. systemd 252 (Debian 12) has no `Type=notify-reload`, and `kill -HUP` returns before the daemon has
/// read the file, so `systemctl reload notifyd && notify send …` could still meet the old limits, and a file that
/// cannot be used would go unnoticed by `systemctl reload`.
///
/// The daemon counts every reload it is done with in `STATS` (`reloads`, `reloads_failed`) and names its own `pid`
/// there: the request reads all three, sends SIGHUP to that pid (so never to a process a stale pid names), and asks
/// again until one of the counts has moved. Two reloads at once (another `kill -HUP` meanwhile) may each see the
/// other's count move; systemd runs one reload job of a unit at a time.
enum ReloadRequest {
    /// How long a reload may take before the request gives up (systemd's own TimeoutSec= is longer).
    static let patience: Duration = .seconds(60)
    /// How often the daemon is asked whether it is done; a reload takes a millisecond or two.
    static let interval: Duration = .milliseconds(5)

    /// What happened, with the exit status `notifyd --reload` reports it by.
    enum Outcome: Equatable {
        case applied
        /// The daemon kept its configuration: the file cannot be used.
        case refused
        case unreachable(String)
        case timedOut

        var exitStatus: Int32 {
            switch self {
            case .applied: return 0
            case .refused: return 78
            case .unreachable: return 69
            case .timedOut: return 1
            }
        }

        var sentence: String? {
            switch self {
            case .applied: return nil
            case .refused:
                return "notifyd kept its running configuration: the file cannot be used (its log says why; check it with notifyd --check-config)"
            case .unreachable(let why): return why
            case .timedOut: return "notifyd did not finish reloading within \(ReloadRequest.patience)"
            }
        }
    }

    /// Sends SIGHUP to the daemon listening on `socketPath` and waits until it has reloaded.
    static func run(socketPath: String) async -> Outcome {
        let connection: StatsQuery
        let before: (applied: UInt64, refused: UInt64)
        let pid: Int32
        do {
            connection = try StatsQuery(socketPath: socketPath)
            let stats = try connection.stats()
            before = counts(stats)
            guard let reported = stats["pid"].flatMap(Int32.init(exactly:)), reported > 1 else {
                return .unreachable("the daemon at \(socketPath) does not say its process id; is it an older notifyd?")
            }
            pid = reported
        } catch {
            return .unreachable("cannot ask notifyd at \(socketPath) how its reloads went: \(error)")
        }
        guard kill(pid, SIGHUP) == 0 else {
            return .unreachable("cannot signal notifyd (process \(pid)): \(String(cString: strerror(errno)))")
        }
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: patience)
        while clock.now < deadline {
            do {
                let now = counts(try connection.stats())
                if now.applied > before.applied { return .applied }
                if now.refused > before.refused { return .refused }
                try await Task.sleep(for: interval)
            } catch {
                return .unreachable("notifyd at \(socketPath) went away while reloading: \(error)")
            }
        }
        return .timedOut
    }

    private static func counts(_ stats: ServerStats) -> (applied: UInt64, refused: UInt64) {
        (stats["reloads"] ?? 0, stats["reloads_failed"] ?? 0)
    }
}
