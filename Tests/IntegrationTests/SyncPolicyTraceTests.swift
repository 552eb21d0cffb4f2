import Foundation
import Testing

/// `sync = always` on a real notifyd, seen from outside: the daemon runs under `strace` (installed by
/// `script/bootstrap --for-tests`), which records its system calls in order, thread by thread. The unit tests count
/// the log's `fsync` calls; this one checks what a user relies on, on the real binary: no `OK` leaves before the
/// `fsync` of the log write that holds it, and `sync = never` adds none.
@Suite("sync = always on a real notifyd, under strace", .timeLimit(.minutes(10)))
struct SyncPolicyTraceTests {
    /// One system call of the trace that matters here.
    enum Call: Equatable {
        case logWrite, logSync, acknowledgement
    }

    @Test("sync = always: every OK is written after the fsync of the log write before it; sync = never: no fsync of the log while publishes are acknowledged", arguments: ["always", "never"])
    func fsyncBeforeAcknowledgement(policy: String) async throws {
        let directory = try TemporaryDirectory()
        let trace = directory.path + "/trace"
        let socket = directory.path + "/notifyd.sock"
        _ = FileManager.default.createFile(atPath: directory.path + "/notifyd.conf", contents: Data("# test daemon\n".utf8))
        let traced = try ChildProcess("/usr/bin/strace", [
            "-f", "-qq", "-s", "48", "-o", trace, "-e", "trace=openat,close,write,writev,sendmsg,fsync,fdatasync",
            Binaries.notifyd, "--socket", socket, "--state-dir", directory.path + "/state",
            "--config", directory.path + "/notifyd.conf", "--sync", policy,
        ])
        try await traced.standardError.wait("notifyd to listen under strace") { $0.contains("listening") }
        let daemonPID = try #require(Self.child(of: traced.pid), "strace started notifyd")

        let publishes = 20
        for number in 1...publishes {
            let sent = try await IntegrationTests.notify(["send", "trace.t", "message \(number)"], socket: socket)
            #expect(sent.status == 0, "\(sent.output)")
        }
        kill(daemonPID, SIGTERM)
        #expect(try await traced.exitStatus() == 0, "notifyd exited 0 under strace: \(traced.standardError.text.suffix(2_000))")

        let text = try String(contentsOfFile: trace, encoding: .utf8)
        let calls = try Self.calls(in: text, logPath: directory.path + "/state/state.log")
        let acknowledgements = calls.indices.filter { calls[$0].call == .acknowledgement }
        try #require(
            acknowledgements.count == publishes,
            "one OK per notify send, seen in the trace; its lines with OK or state.log: \(text.split(separator: "\n").filter { $0.contains("OK") || $0.contains("state.log") }.prefix(20))"
        )
        if policy == "always" {
            for index in acknowledgements {
                let thread = calls[index].thread
                let before = calls[..<index].last { $0.thread == thread && $0.call != .acknowledgement }
                #expect(before?.call == .logSync, "the log was synced after its last write, before this OK: \(calls[..<index].suffix(4))")
            }
            #expect(calls.count { $0.call == .logSync } >= publishes, "one sync per batch at least")
        } else {
            let during = calls[(acknowledgements.first ?? 0)...(acknowledgements.last ?? 0)]
            #expect(!during.contains { $0.call == .logSync }, "sync = never syncs no log write of a batch")
            #expect(during.contains { $0.call == .logWrite }, "the log is written all the same")
        }
    }

    @Test("the trace is read whatever width strace pads the pids to")
    func readsPaddedPids() throws {
        let trace = """
            7929  openat(AT_FDCWD, "/s/state.log", O_WRONLY|O_APPEND|O_CLOEXEC) = 13
            7929  write(13, "x", 1) = 1
            7929  fsync(13)                         = 0
            7929  write(16, "#1 OK 1\\n", 8)         = 8
            12345 write(13, "y", 1) = 1
            12345 writev(17, [{iov_base="#2 OK 2\\n", iov_len=8}], 1) = 8
            """
        let calls = try Self.calls(in: trace, logPath: "/s/state.log")
        #expect(calls.map(\.call) == [.logWrite, .logSync, .acknowledgement, .logWrite, .acknowledgement])
        #expect(calls.map(\.thread) == [7929, 7929, 7929, 12345, 12345])
    }

    /// The first child of process `pid`.
    static func child(of pid: pid_t) -> pid_t? {
        let children = try? String(contentsOfFile: "/proc/\(pid)/task/\(pid)/children", encoding: .utf8)
        return children?.split(separator: " ").first.flatMap { pid_t($0) }
    }

    /// The log writes, log syncs and acknowledgements of a `strace -f` trace, in order, each with its thread. The log's
    /// descriptors are followed through the trace (a compaction opens it again; a closed number may be reused).
    static func calls(in trace: String, logPath: String) throws -> [(thread: Int, call: Call)] {
        var logDescriptors: Set<Int> = []
        var calls: [(thread: Int, call: Call)] = []
        let acknowledgement = try Regex(#"^(write|writev|sendmsg)\((\d+), .*"(#\d+ )?OK[ \\]"#)
        for line in trace.split(separator: "\n") {
            let fields = line.split(separator: " ", maxSplits: 1)
            guard fields.count == 2, let thread = Int(fields[0]) else { continue }
            // strace pads the pid to the width of the largest one (`7929  write(…`): a run on a fresh machine, with
            // short pids, once found no call at all here.
            let call = fields[1].drop(while: { $0 == " " })
            let descriptor = call.firstMatch(of: #/^\w+\((\d+)/#).flatMap { Int($0.1) }
            if call.hasPrefix("openat("), call.contains("\"\(logPath)\""), call.contains("O_APPEND"),
                let opened = call.firstMatch(of: #/= (\d+)$/#).flatMap({ Int($0.1) })
            {
                logDescriptors.insert(opened)
            } else if call.hasPrefix("close("), let descriptor {
                logDescriptors.remove(descriptor)
            } else if call.hasPrefix("write("), let descriptor, logDescriptors.contains(descriptor) {
                calls.append((thread, .logWrite))
            } else if call.hasPrefix("fsync(") || call.hasPrefix("fdatasync("), let descriptor, logDescriptors.contains(descriptor) {
                calls.append((thread, .logSync))
            } else if call.firstMatch(of: acknowledgement) != nil {
                calls.append((thread, .acknowledgement))
            }
        }
        return calls
    }
}
