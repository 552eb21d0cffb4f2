import Foundation

/// A release `notifyd` started for a benchmark, on a socket in a fresh temporary directory, with its own state
/// directory and no configuration file.
final class BenchmarkDaemon: Sendable {
    let directory: String
    let socketPath: String
    private let process = Process()

    /// Starts the `notifyd` that sits next to this executable, with `arguments`, and waits until it accepts.
    init(arguments: [String] = []) throws {
        let binary = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent("notifyd").path
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            throw LoadError("\(binary) is not built; run `swift build -c release` first")
        }
        var template = Array("/tmp/notifyd-load-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw LoadError("mkdtemp failed") }
        directory = String(cString: made)
        socketPath = directory + "/notifyd.sock"
        _ = FileManager.default.createFile(atPath: directory + "/notifyd.conf", contents: Data())
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["--socket", socketPath, "--state-dir", directory + "/state", "--config", directory + "/notifyd.conf", "--log-level", "warning"] + arguments
        process.standardError = FileHandle.nullDevice
        try process.run()
        let deadline = ContinuousClock.now + .seconds(20)
        while (try? RawConnection(path: socketPath)) == nil {
            guard ContinuousClock.now < deadline, process.isRunning else { throw LoadError("notifyd did not start listening") }
            usleep(10_000)
        }
    }

    var pid: Int32 { process.processIdentifier }

    /// The daemon's resident set size, in KiB.
    var residentKiB: Int {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") }
        return line.flatMap { $0.split(separator: " ").dropFirst().first.flatMap { Int($0) } } ?? 0
    }

    /// The daemon's CPU time (user + system) so far, in seconds.
    var cpuSeconds: Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let end = stat.lastIndex(of: ")")
        else { return 0 }
        let fields = stat[stat.index(after: end)...].split(separator: " ")
        // Fields 14 and 15 of stat(5) (utime, stime), counted after the command name: 12 and 13.
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    func stop() {
        process.terminate()
        process.waitUntilExit()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

struct LoadError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
