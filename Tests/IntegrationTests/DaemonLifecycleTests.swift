import Foundation
import NotifyBus
import Testing

/// Starting and stopping the real daemon: its socket file, a stale one, a rival.
@Suite("notifyd start and stop", .timeLimit(.minutes(10)))
struct DaemonLifecycleTests {
    @Test("a killed daemon's stale socket is replaced on restart")
    func staleSocketReplaced() async throws {
        let directory = try TemporaryDirectory()
        let first = try await TestDaemon.start(in: directory)
        #expect(try await first.notify(["send", "s", "before"]).status == 0)
        try await first.kill()
        #expect(FileManager.default.fileExists(atPath: first.socketPath), "SIGKILL leaves the socket file behind")
        let refused = try await first.notify(["send", "s", "x"])
        #expect(refused.status == 69 && refused.stderr.contains("stale"))

        let second = try await TestDaemon.start(in: directory)
        #expect(second.log.contains("replaced a stale socket"))
        #expect(try await second.notify(["send", "s", "after"]).status == 0)
        #expect(try await second.notify(["latest", "s"]).output == "after\n")
        try await second.stop()
    }

    @Test("a second daemon on the same socket refuses to start and leaves the first one serving")
    func secondDaemonRefuses() async throws {
        let first = try await TestDaemon.start()
        let second = try TestDaemon.launch(in: first.directory)
        #expect(try await second.child.exitStatus() == 73)
        #expect(second.log.contains("another notifyd is running on \(first.socketPath)"))
        #expect(try await first.notify(["send", "still", "here"]).status == 0)

        // Without the lock file (deleted by hand, or on a file system that lost it), the socket itself is probed:
        // someone answers there, so it is not stale and is never unlinked.
        try FileManager.default.removeItem(atPath: first.socketPath + ".lock")
        let third = try TestDaemon.launch(in: TemporaryDirectory(), arguments: ["--socket", first.socketPath])
        #expect(try await third.child.exitStatus() == 73)
        #expect(third.log.contains("another notifyd is already listening on \(first.socketPath)"))
        #expect(try await first.notify(["send", "still", "there"]).status == 0)
        try await first.stop()
    }

    @Test("a path that is not a socket is never removed")
    func notASocket() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path + "/notifyd.sock"
        #expect(FileManager.default.createFile(atPath: path, contents: Data("precious".utf8)))
        let daemon = try TestDaemon.launch(in: directory)
        #expect(try await daemon.child.exitStatus() == 73)
        #expect(daemon.log.contains("is not a socket"))
        #expect(FileManager.default.contents(atPath: path) == Data("precious".utf8))
    }

    @Test(
        "SIGTERM (systemd) or SIGINT (Ctrl-C) stops the daemon gracefully: subscribers get what they are owed, the socket file goes",
        arguments: [SIGTERM, SIGINT]
    )
    func gracefulStop(signal: Int32) async throws {
        let daemon = try await TestDaemon.start()
        // A client that does not reconnect: its subscription ends with the connection, saying why.
        let client = try await NotifyClient.connect(to: daemon.socketPath, reconnectWithin: nil)
        let subscription = try await client.subscribe(to: [TopicPattern("bye")])
        try await client.publishAcknowledged("last words", to: Topic("bye"))
        daemon.child.signal(signal)
        #expect(try await daemon.child.exitStatus() == 0)
        let received = try await withDeadline(.seconds(30), waitingFor: "the subscription to end with the daemon") {
            var received: [String] = []
            do {
                for try await delivery in subscription.messages { received.append(delivery.text!) }
            } catch let error as NotifyClientError {
                #expect(error.kind == .connectionClosed && error.message.contains("shutting down"))
            }
            return received
        }
        #expect(received == ["last words"])
        #expect(!FileManager.default.fileExists(atPath: daemon.socketPath))
        #expect(daemon.log.contains("stopped"))
    }

    @Test("without --socket, notifyd and notify both take $NOTIFYD_SOCKET, never systemd's $NOTIFY_SOCKET")
    func socketFromEnvironment() async throws {
        let directory = try TemporaryDirectory()
        let chosen = directory.path + "/env/notifyd.sock"
        var environment = ProcessInfo.processInfo.environment
        environment["NOTIFYD_SOCKET"] = chosen
        environment["NOTIFY_SOCKET"] = directory.path + "/systemd.sock"
        try Data("# empty\n".utf8).write(to: URL(fileURLWithPath: directory.path + "/notifyd.conf"))
        let daemon = try ChildProcess(
            Binaries.notifyd,
            ["--state-dir", directory.path + "/state", "--config", directory.path + "/notifyd.conf"],
            environment: environment
        )
        try await daemon.standardError.wait("notifyd to listen on \(chosen)") { $0.contains("listening (socket=\(chosen)") }
        #expect(!FileManager.default.fileExists(atPath: directory.path + "/systemd.sock"))
        let sent = try ChildProcess(Binaries.notify, ["send", "env.topic", "found"], environment: environment)
        #expect(try await sent.exitStatus() == 0, "notify found the daemon by the same variable")
        #expect(try await notify(["latest", "env.topic"], socket: chosen).output == "found\n")
        daemon.signal(SIGTERM)
        #expect(try await daemon.exitStatus() == 0)
    }

    @Test("the daemon creates missing directories for its socket")
    func createsDirectories() async throws {
        let directory = try TemporaryDirectory()
        let nested = try TestDaemon.launch(in: directory, arguments: ["--socket", directory.path + "/a/b/n.sock"])
        try await nested.child.standardError.wait("listening") { $0.contains("listening") }
        #expect(try await notify(["send", "x", "y"], socket: directory.path + "/a/b/n.sock").status == 0)
        var info = stat()
        stat(directory.path + "/a/b", &info)
        #expect(info.st_mode & 0o777 == (getuid() == 0 ? 0o755 : 0o700))
        try await nested.stop()
    }

    @Test("--check-config PATH prints the settings and exits 0 for a usable file, 78 with the line for a bad one")
    func checkConfig() async throws {
        let directory = try TemporaryDirectory()
        let good = directory.path + "/good.conf"
        let bad = directory.path + "/bad.conf"
        try "# fine\nmax-payload = 100\nsync = always\n[rules]\nops = allow all ops.> user:root group:root unit:ops.service\n"
            .write(toFile: good, atomically: true, encoding: .utf8)
        try "log-level = info\nmax-topics = many\n".write(toFile: bad, atomically: true, encoding: .utf8)

        let checked = try ChildProcess(Binaries.notifyd, ["--check-config", good, "--max-topics", "7"])
        #expect(try await checked.exitStatus() == 0)
        try await checked.standardOutput.wait("the settings") { _ in checked.standardOutput.isClosed }
        let settings = checked.standardOutput.text
        #expect(settings.contains("# \(good): usable"))
        #expect(settings.contains("max-payload = 100") && settings.contains("sync = always"), "from the file")
        #expect(settings.contains("max-topics = 7"), "the command line wins: \(settings)")
        #expect(settings.hasSuffix("[rules]\nops = allow all ops.> user:0 group:0 unit:ops.service\n"), "rules, names as numbers: \(settings)")

        let refused = try ChildProcess(Binaries.notifyd, ["--check-config", bad])
        #expect(try await refused.exitStatus() == 78)
        try await refused.standardError.wait("the error, with its line") { $0.contains("\(bad), line 2: max-topics") }

        let missing = try ChildProcess(Binaries.notifyd, ["--check-config", directory.path + "/none.conf"])
        #expect(try await missing.exitStatus() == 78)
        #expect(!FileManager.default.fileExists(atPath: directory.path + "/notifyd.sock"), "checking starts nothing")
    }
}
