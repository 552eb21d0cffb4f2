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
        /// A write to the log; an `fsync` of it begun, and ended (one after the other when strace saw it whole, apart
        /// when another thread's call came in between); an `OK` sent.
        case logWrite, logSyncBegun, logSyncEnded, acknowledgement
    }

    @Test("sync = always: every OK is written after the fsync of the log write before it; sync = never: no fsync of the log while publishes are acknowledged", arguments: ["always", "never"])
    func fsyncBeforeAcknowledgement(policy: String) async throws {
        let directory = try TemporaryDirectory()
        let trace = directory.path + "/trace"
        let socket = directory.path + "/notifyd.sock"
        _ = FileManager.default.createFile(atPath: directory.path + "/notifyd.conf", contents: Data("# test daemon\n".utf8))
        let traced = try ChildProcess("/usr/bin/strace", [
            "-f", "-qq", "-s", "48", "-o", trace, "-e", "trace=openat,close,fcntl,write,writev,sendmsg,fsync,fdatasync",
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
            // The publishes come one at a time: each OK's record is the last log write before it, and a sync of the
            // log (on the daemon's sync thread) must have begun after that write and ended before the OK.
            for index in acknowledgements {
                let lastWrite = try #require(calls[..<index].lastIndex { $0.call == .logWrite }, "a log write before the OK")
                let begun = calls[lastWrite..<index].firstIndex { $0.call == .logSyncBegun }
                let ended = begun.flatMap { begun in calls[begun..<index].firstIndex { $0.call == .logSyncEnded && $0.thread == calls[begun].thread } }
                #expect(ended != nil, "a sync of the log began after its last write and ended before this OK: \(calls[lastWrite...index])")
            }
            #expect(calls.count { $0.call == .logSyncEnded } >= publishes, "one sync per acknowledged publish at least")
        } else {
            let during = calls[(acknowledgements.first ?? 0)...(acknowledgements.last ?? 0)]
            #expect(!during.contains { $0.call == .logSyncBegun }, "sync = never syncs no log write of a batch")
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
        #expect(calls.map(\.call) == [.logWrite, .logSyncBegun, .logSyncEnded, .acknowledgement, .logWrite, .acknowledgement])
        #expect(calls.map(\.thread) == [7929, 7929, 7929, 7929, 12345, 12345])
    }

    @Test("the trace follows the log's descriptor into a duplicate, and an fsync another thread's call interrupts")
    func readsSyncsOnAnotherThread() throws {
        let trace = """
            100 openat(AT_FDCWD, "/s/state.log", O_WRONLY|O_APPEND|O_CLOEXEC) = 13
            100 write(13, "x", 1) = 1
            100 fcntl(13, F_DUPFD_CLOEXEC, 0) = 21
            101 fsync(21 <unfinished ...>
            100 write(17, "#9 PONG\\n", 8) = 8
            101 <... fsync resumed>) = 0
            101 close(21) = 0
            100 write(16, "#1 OK 1\\n", 8) = 8
            101 fsync(22) = 0
            """
        let calls = try Self.calls(in: trace, logPath: "/s/state.log")
        #expect(calls.map(\.call) == [.logWrite, .logSyncBegun, .logSyncEnded, .acknowledgement])
        #expect(calls.map(\.thread) == [100, 101, 101, 100])
    }

    /// The first child of process `pid`.
    static func child(of pid: pid_t) -> pid_t? {
        let children = try? String(contentsOfFile: "/proc/\(pid)/task/\(pid)/children", encoding: .utf8)
        return children?.split(separator: " ").first.flatMap { pid_t($0) }
    }

    /// The log writes, log syncs and acknowledgements of a `strace -f` trace, in order, each with its thread. The log's
    /// descriptors are followed through the trace (a compaction opens it again, the sync thread gets a duplicate; a
    /// closed number may be reused).
    static func calls(in trace: String, logPath: String) throws -> [(thread: Int, call: Call)] {
        var logDescriptors: Set<Int> = []
        /// Threads in an `fsync` of the log that strace shows as unfinished until its `resumed` line.
        var syncsUnfinished: Set<Int> = []
        var calls: [(thread: Int, call: Call)] = []
        let acknowledgement = try Regex(#"^(write|writev|sendmsg)\((\d+), .*"(#\d+ )?OK[ \\]"#)
        for line in trace.split(separator: "\n") {
            let fields = line.split(separator: " ", maxSplits: 1)
            guard fields.count == 2, let thread = Int(fields[0]) else { continue }
            // strace pads the pid to the width of the largest one (`7929  write(…`): a run on a fresh machine, with
            // short pids, once found no call at all here.
            let call = fields[1].drop(while: { $0 == " " })
            let descriptor = call.firstMatch(of: #/^\w+\((\d+)/#).flatMap { Int($0.1) }
            let returned = call.firstMatch(of: #/= (\d+)$/#).flatMap { Int($0.1) }
            if call.hasPrefix("openat("), call.contains("\"\(logPath)\""), call.contains("O_APPEND"), let returned {
                logDescriptors.insert(returned)
            } else if call.hasPrefix("fcntl("), call.contains("F_DUPFD"), let descriptor, logDescriptors.contains(descriptor), let returned {
                logDescriptors.insert(returned)  // the daemon's sync thread syncs a duplicate of the log's descriptor
            } else if call.hasPrefix("close("), let descriptor {
                logDescriptors.remove(descriptor)
            } else if call.hasPrefix("write("), let descriptor, logDescriptors.contains(descriptor) {
                calls.append((thread, .logWrite))
            } else if call.hasPrefix("fsync(") || call.hasPrefix("fdatasync("), let descriptor, logDescriptors.contains(descriptor) {
                calls.append((thread, .logSyncBegun))
                if call.hasSuffix("<unfinished ...>") {
                    syncsUnfinished.insert(thread)
                } else {
                    calls.append((thread, .logSyncEnded))
                }
            } else if call.hasPrefix("<... fsync resumed>") || call.hasPrefix("<... fdatasync resumed>"), syncsUnfinished.remove(thread) != nil {
                calls.append((thread, .logSyncEnded))
            } else if call.firstMatch(of: acknowledgement) != nil {
                calls.append((thread, .acknowledgement))
            }
        }
        return calls
    }
}
