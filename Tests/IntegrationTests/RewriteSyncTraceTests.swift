import Foundation
import Testing

/// A rewrite of the state log (a new log or a recovery from damage at start, a compaction at a clean stop: one code
/// path) on a real notifyd, seen from outside under `strace`: the copy `state.log.tmp` is `fsync`ed after its last write and before it is
/// renamed over `state.log`, and the state directory is `fsync`ed after the rename. `StateLogCrashTests` checks the
/// order of the steps a probe is told of; only the system calls show that the syncs are made, so that a power loss
/// at any point leaves one complete log under the name.
@Suite("A state-log rewrite syncs the copy before the rename and the directory after, under strace", .timeLimit(.minutes(10)))
struct RewriteSyncTraceTests {
    /// What the daemon finds in its state directory when it starts.
    enum Start: String, CaseIterable, CustomTestStringConvertible {
        /// Nothing: it writes a new log.
        case fresh
        /// A log it cannot read: it keeps it aside and writes the recovered one.
        case damaged

        var testDescription: String { rawValue }
    }

    /// One system call of the trace that matters here, its descriptor's path resolved.
    enum Call: Equatable {
        case write(path: String)
        case sync(path: String)
        case rename(from: String, to: String)
        case link(from: String, to: String)
    }

    @Test("each rename of state.log.tmp over state.log comes after an fsync of the copy that follows its last write, and is followed by an fsync of the directory", arguments: Start.allCases)
    func syncsAroundTheRename(start: Start) async throws {
        let directory = try TemporaryDirectory()
        let state = directory.path + "/state"
        let log = state + "/state.log"
        let trace = directory.path + "/trace"
        if start == .damaged {
            try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
            #expect(FileManager.default.createFile(atPath: log, contents: Data("not a notifyd log\n".utf8)))
        }
        _ = FileManager.default.createFile(atPath: directory.path + "/notifyd.conf", contents: Data("# test daemon\n".utf8))
        let traced = try ChildProcess("/usr/bin/strace", [
            "-f", "-qq", "-s", "0", "-o", trace,
            "-e", "trace=open,openat,close,write,fsync,fdatasync,rename,renameat,renameat2,link,linkat",
            Binaries.notifyd, "--socket", directory.path + "/notifyd.sock", "--state-dir", state,
            "--config", directory.path + "/notifyd.conf",
        ])
        try await traced.standardError.wait("notifyd to listen under strace") { $0.contains("listening") }
        let daemonPID = try #require(SyncPolicyTraceTests.child(of: traced.pid), "strace started notifyd")
        kill(daemonPID, SIGTERM)
        #expect(try await traced.exitStatus() == 0, "notifyd exited 0 under strace: \(traced.standardError.text.suffix(2_000))")
        if start == .damaged {
            let kept = try FileManager.default.contentsOfDirectory(atPath: state).filter { $0.hasPrefix("state.log.damaged-") }
            #expect(kept.count == 1, "the damaged log was kept aside: \(kept); the daemon said: \(traced.standardError.text)")
        }

        let calls = Self.calls(in: try String(contentsOfFile: trace, encoding: .utf8))
        let temporary = log + ".tmp"
        let renames = calls.indices.filter { calls[$0] == .rename(from: temporary, to: log) }
        try #require(renames.count >= 2, "the daemon rewrote its log at start, and compacted it when it stopped: \(calls)")
        for rename in renames {
            let before = calls[..<rename]
            let lastWrite = try #require(before.lastIndex(of: .write(path: temporary)), "the copy was written before its rename: \(calls)")
            #expect(
                calls[lastWrite..<rename].contains(.sync(path: temporary)),
                "state.log.tmp is fsynced after its last write and before it replaces state.log: \(calls[lastWrite...rename])"
            )
            // Before the next rewrite's rename, whose own sync would do for it too.
            let next = renames.first { $0 > rename } ?? calls.endIndex
            #expect(
                calls[(rename + 1)..<next].contains(.sync(path: state)),
                "the directory is fsynced after the rename, so the new name survives a power loss: \(calls[rename..<next])"
            )
        }
        if start == .damaged {
            // Recovery keeps the damaged log under a second name first, and syncs the directory before the rename.
            let link = try #require(calls.firstIndex { if case .link(log, _) = $0 { true } else { false } }, "the damaged log was linked aside: \(calls)")
            let rename = try #require(renames.first)
            #expect(link < rename && calls[link..<rename].contains(.sync(path: state)), "the name kept aside is synced before the rename: \(calls)")
        }
    }

    @Test("the trace is read whatever width strace pads the pids to, calls another thread interrupted included, descriptors followed by number")
    func readsTheTrace() {
        let trace = """
            7929  openat(AT_FDCWD, "/s/state.log.tmp", O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0600) = 5
            7929  write(5, ""..., 40) = 40
            7930  write(9, ""..., 8 <unfinished ...>
            7929  fsync(5 <unfinished ...>
            7930  <... write resumed>) = 8
            7929  <... fsync resumed>) = 0
            7929  close(5) = 0
            7929  rename("/s/state.log.tmp", "/s/state.log") = 0
            12345 openat(AT_FDCWD, "/s", O_RDONLY|O_CLOEXEC|O_DIRECTORY <unfinished ...>
            7929  link("/s/state.log", "/s/state.log.damaged-1") = 0
            12345 <... openat resumed>) = 5
            12345 fsync(5) = 0
            12345 openat(AT_FDCWD, "/missing", O_RDONLY) = -1 ENOENT (No such file or directory)
            12345 fsync(6) = 0
            12345 renameat2(AT_FDCWD, "/a", AT_FDCWD, "/b", 0) = 0
            """
        #expect(Self.calls(in: trace) == [
            .write(path: "/s/state.log.tmp"), .write(path: "descriptor 9"), .sync(path: "/s/state.log.tmp"), .rename(from: "/s/state.log.tmp", to: "/s/state.log"),
            .link(from: "/s/state.log", to: "/s/state.log.damaged-1"), .sync(path: "/s"), .sync(path: "descriptor 6"),
            .rename(from: "/a", to: "/b"),
        ])
    }

    /// The writes, syncs, renames and links of a `strace -f` trace, in the order they ended, each descriptor named by
    /// the path it was opened with (a closed number may be reused); a descriptor opened before the trace, by its
    /// number. A call that strace shows cut by another thread's (`<unfinished ...>`) is put together again with
    /// its `resumed` line.
    static func calls(in trace: String) -> [Call] {
        var paths: [Int: String] = [:]
        var unfinished: [Int: Substring] = [:]
        var calls: [Call] = []
        for line in trace.split(separator: "\n") {
            let fields = line.split(separator: " ", maxSplits: 1)
            guard fields.count == 2, let thread = Int(fields[0]) else { continue }
            var call = fields[1].drop(while: { $0 == " " })
            if call.hasSuffix(" <unfinished ...>") {
                unfinished[thread] = call.dropLast(" <unfinished ...>".count)
                continue
            }
            if call.hasPrefix("<... "), let start = unfinished.removeValue(forKey: thread), let end = call.range(of: " resumed>") {
                call = start + call[end.upperBound...]
            }
            guard let returned = call.firstMatch(of: #/\) += (-?\d+)/#).flatMap({ Int($0.1) }), returned >= 0 else { continue }
            let strings = call.matches(of: #/"([^"]*)"/#).map { String($0.1) }
            let descriptor = call.firstMatch(of: #/^\w+\((\d+)/#).flatMap { Int($0.1) }
            func path(_ descriptor: Int) -> String { paths[descriptor] ?? "descriptor \(descriptor)" }
            if call.hasPrefix("openat(") || call.hasPrefix("open("), let opened = strings.first {
                paths[returned] = opened
            } else if call.hasPrefix("close("), let descriptor {
                paths[descriptor] = nil
            } else if call.hasPrefix("write("), let descriptor {
                calls.append(.write(path: path(descriptor)))
            } else if call.hasPrefix("fsync(") || call.hasPrefix("fdatasync("), let descriptor {
                calls.append(.sync(path: path(descriptor)))
            } else if call.hasPrefix("rename"), strings.count == 2 {
                calls.append(.rename(from: strings[0], to: strings[1]))
            } else if call.hasPrefix("link"), strings.count == 2 {
                calls.append(.link(from: strings[0], to: strings[1]))
            }
        }
        return calls
    }
}
