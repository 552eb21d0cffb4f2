import Foundation
import Testing

/// `sync = always` on a real notifyd, seen from outside: the daemon runs under `strace` (installed by
/// `script/bootstrap --for-tests`), which records its system calls in order, thread by thread. The unit tests count
/// the log's `fsync` calls; this one checks what a user relies on, on the real binary: no `OK` leaves before an
/// `fsync` of the log that began after its record was written, and `sync = never` adds none. The log's tail is
/// mostly written through a mapping (`LogTail`), which no system call shows: that each acknowledged message is in
/// the log file is read from the file itself, while the daemon runs.
@Suite("sync = always on a real notifyd, under strace", .timeLimit(.minutes(10)))
struct SyncPolicyTraceTests {
    /// One system call of the trace that matters here.
    enum Call: Equatable {
        /// A write to the log; an `fsync` of it begun, and ended (one after the other when strace saw it whole, apart
        /// when another thread's call came in between); an `OK` sent.
        case logWrite, logSyncBegun, logSyncEnded, acknowledgement
    }

    @Test("sync = always: every OK is written after an fsync of the log begun once its record was written; sync = never: no fsync of the log while publishes are acknowledged; each acknowledged message is in the log file", arguments: ["always", "never"])
    func fsyncBeforeAcknowledgement(policy: String) async throws {
        let directory = try TemporaryDirectory()
        let trace = directory.path + "/trace"
        let socket = directory.path + "/notifyd.sock"
        _ = FileManager.default.createFile(atPath: directory.path + "/notifyd.conf", contents: Data("# test daemon\n".utf8))
        let traced = try ChildProcess("/usr/bin/strace", [
            "-f", "-qq", "-s", "48", "-o", trace, "-e", "trace=openat,close,fcntl,write,pwrite64,writev,sendmsg,fsync,fdatasync",
            Binaries.notifyd, "--socket", socket, "--state-dir", directory.path + "/state",
            "--config", directory.path + "/notifyd.conf", "--sync", policy,
        ])
        try await traced.standardError.wait("notifyd to listen under strace") { $0.contains("listening") }
        let daemonPID = try #require(Self.child(of: traced.pid), "strace started notifyd")

        let publishes = 20
        let log = directory.path + "/state/state.log"
        for number in 1...publishes {
            let sent = try await IntegrationTests.notify(["send", "trace.t", "message \(number)"], socket: socket)
            #expect(sent.status == 0, "\(sent.output)")
            let written = try Data(contentsOf: URL(fileURLWithPath: log))
            #expect(written.range(of: Data("message \(number)\n".utf8)) != nil, "message \(number) is in the log file once acknowledged")
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
            // The publishes come one at a time, each sent once the one before was acknowledged: each OK's record was
            // written (a `pwrite`, or a copy into the mapped tail that strace does not see) after the OK before it,
            // so a sync of the log (on the daemon's sync thread) must have begun after that OK, and after the last
            // `pwrite` of the log if there was one since, and ended before this OK.
            var previous = -1
            for index in acknowledgements {
                let lastWrite = calls[(previous + 1)..<index].lastIndex { $0.call == .logWrite }
                let from = (lastWrite ?? previous) + 1
                let begun = calls[from..<index].firstIndex { $0.call == .logSyncBegun }
                let ended = begun.flatMap { begun in calls[begun..<index].firstIndex { $0.call == .logSyncEnded && $0.thread == calls[begun].thread } }
                #expect(ended != nil, "a sync of the log began after the record was written and ended before this OK: \(calls[max(previous, 0)...index])")
                previous = index
            }
            #expect(calls.count { $0.call == .logSyncEnded } >= publishes, "one sync per acknowledged publish at least")
        } else {
            let during = calls[(acknowledgements.first ?? 0)...(acknowledgements.last ?? 0)]
            #expect(!during.contains { $0.call == .logSyncBegun }, "sync = never syncs no log write of a batch")
        }
    }

    @Test("the trace is read whatever width strace pads the pids to")
    func readsPaddedPids() throws {
        let trace = """
            7929  openat(AT_FDCWD, "/s/state.log", O_WRONLY|O_APPEND|O_CLOEXEC) = 13
            7929  write(13, "x", 1) = 1
            7929  fsync(13)                         = 0
            7929  write(16, "#1 OK 1\\n", 8)         = 8
            12345 pwrite64(13, "y", 1, 40) = 1
            12345 writev(17, [{iov_base="#2 OK 2\\n", iov_len=8}], 1) = 8
            """
        let calls = try Self.calls(in: trace, logPath: "/s/state.log")
        #expect(calls.map(\.call) == [.logWrite, .logSyncBegun, .logSyncEnded, .acknowledgement, .logWrite, .acknowledgement])
        #expect(calls.map(\.thread) == [7929, 7929, 7929, 7929, 12345, 12345])
    }

    @Test("the trace follows the log's descriptor into a duplicate, and an fsync another thread's call interrupts")
    func readsSyncsOnAnotherThread() throws {
        let trace = """
            100 openat(AT_FDCWD, "/s/state.log", O_RDWR|O_CLOEXEC) = 13
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
            if call.hasPrefix("openat("), call.contains("\"\(logPath)\""), call.contains("O_APPEND") || call.contains("O_RDWR"), let returned {
                logDescriptors.insert(returned)
            } else if call.hasPrefix("fcntl("), call.contains("F_DUPFD"), let descriptor, logDescriptors.contains(descriptor), let returned {
                logDescriptors.insert(returned)  // the daemon's sync thread syncs a duplicate of the log's descriptor
            } else if call.hasPrefix("close("), let descriptor {
                logDescriptors.remove(descriptor)
            } else if call.hasPrefix("write(") || call.hasPrefix("pwrite64("), let descriptor, logDescriptors.contains(descriptor) {
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
