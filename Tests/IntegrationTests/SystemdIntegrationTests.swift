import Foundation
import NotifyBus
import Testing

/// What the daemon does for systemd, checked on the real binary without systemd: the notify socket, socket
/// activation through `systemd-socket-activate`, reloads, and the state directory across restarts.
@Suite("notifyd for systemd", .timeLimit(.minutes(10)))
struct SystemdIntegrationTests {
    static func environment(_ extra: [String: String]) -> [String: String] {
        ProcessInfo.processInfo.environment.merging(extra) { $1 }
    }

    @Test("READY=1 once listening, STATUS= with the counts, RELOADING=1 then READY=1 on SIGHUP, STOPPING=1 on SIGTERM")
    func notifySocket() async throws {
        let directory = try TemporaryDirectory()
        let notify = try NotifySocketListener(path: directory.path + "/notify.sock")
        let daemon = try await TestDaemon.start(in: directory, environment: Self.environment(["NOTIFY_SOCKET": notify.path]))
        let ready = try await notify.wait(for: "READY=1") { $0.contains("READY=1") }
        #expect(field("STATUS", in: ready)?.hasPrefix("0 connections, 0 topics") == true)
        #expect(field("MAINPID", in: ready) == String(daemon.child.pid))
        #expect(FileManager.default.fileExists(atPath: daemon.socketPath), "READY=1 comes after the socket exists")

        let client = try await daemon.client()
        let subscription = try await client.subscribe(to: [TopicPattern("status.>")])
        try await client.publishAcknowledged("x", to: Topic("status.topic"))
        let counted = try await notify.wait(for: "a STATUS= with the new counts") {
            field("STATUS", in: $0)?.hasPrefix("1 connections, 1 topics (1 buffered), 1 subscriptions, ") == true
        }
        let rates = /^1 connections, 1 topics \(1 buffered\), 1 subscriptions, \d+(\.\d)? msg\/s in, \d+(\.\d)? msg\/s out$/
        #expect(try rates.wholeMatch(in: field("STATUS", in: counted) ?? "") != nil, "\(counted)")
        _ = subscription

        daemon.child.signal(SIGHUP)
        let reloading = try await notify.wait(for: "RELOADING=1") { $0.contains("RELOADING=1") }
        let monotonic = try #require(field("MONOTONIC_USEC", in: reloading).flatMap(UInt64.init))
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        #expect(monotonic <= UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec / 1_000))
        try await notify.wait(for: "READY=1 after the reload") { $0.contains("READY=1") }

        await client.close()
        daemon.child.signal(SIGTERM)
        try await notify.wait(for: "STOPPING=1") { $0.contains("STOPPING=1") }
        #expect(try await daemon.child.exitStatus() == 0)
    }

    @Test("a SIGHUP sent the moment READY=1 arrives is a reload, never the end; the saved state is served from then on")
    func hangupRightAfterReady() async throws {
        let directory = try TemporaryDirectory()
        // The race it guards against was lost about two times in three; five rounds would catch it.
        for round in 1...5 {
            let notify = try NotifySocketListener(path: directory.path + "/notify-\(round).sock")
            let daemon = try TestDaemon.launch(in: directory, environment: Self.environment(["NOTIFY_SOCKET": notify.path]))
            try await notify.wait(for: "READY=1") { $0.contains("READY=1") }
            daemon.child.signal(SIGHUP)
            let client = try await daemon.client()
            if round > 1 {
                let saved = try await client.latest(Topic("round"))
                #expect(saved?.text == "\(round - 1)", "the previous run's message, restored before READY=1")
            }
            try await notify.wait(for: "RELOADING=1") { $0.contains("RELOADING=1") }
            try await notify.wait(for: "READY=1 after the reload") { _ in notify.messages.count { $0.contains("READY=1") } >= 2 }
            #expect(daemon.child.isRunning)
            try await client.publishAcknowledged("\(round)", to: Topic("round"))
            await client.close()
            #expect(try await daemon.stop() == 0)
        }
    }

    @Test("WATCHDOG=1 pings come at half the interval systemd asks for")
    func watchdog() async throws {
        let directory = try TemporaryDirectory()
        let notify = try NotifySocketListener(path: directory.path + "/notify.sock")
        // A 2 s interval: pings every second. Four intervals then take 4 s, and would take 8 at the full interval;
        // the bound sits between the two, far from either, so scheduling noise cannot move a ping across it.
        let daemon = try await TestDaemon.start(
            in: directory,
            environment: Self.environment(["NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "2000000"])
        )
        for ping in 1...6 {
            try await notify.wait(for: "WATCHDOG=1 ping \(ping)") { $0 == "WATCHDOG=1" }
        }
        // When they came, as the listener's thread saw them, not when this test got to look.
        let seen = zip(notify.messages, notify.arrivals).filter { $0.0 == "WATCHDOG=1" }.map(\.1)
        let fourIntervals = seen[5] - seen[1]
        #expect(fourIntervals < .seconds(6) && fourIntervals > .seconds(3), "four intervals took \(fourIntervals): pings are not at half of 2 s")
        try await daemon.stop()
    }

    @Test("SIGHUP applies a changed configuration file; an unusable one leaves the running configuration in force")
    func reload() async throws {
        let directory = try TemporaryDirectory()
        let notify = try NotifySocketListener(path: directory.path + "/notify.sock")
        let daemon = try await TestDaemon.start(in: directory, environment: Self.environment(["NOTIFY_SOCKET": notify.path]))
        try await notify.wait(for: "READY=1") { $0.contains("READY=1") }
        #expect(try await daemon.client().greeting.limits.maxPayload == 1 << 20)

        try "max-payload = 100\nlog-level = debug\n".write(toFile: daemon.configurationPath, atomically: true, encoding: .utf8)
        daemon.child.signal(SIGHUP)
        try await notify.wait(for: "READY=1 after the reload") { $0.contains("READY=1") }
        // READY=1 comes through the notify socket, the log line through a pipe read apart: waited for, not looked at.
        try await daemon.child.standardError.wait("the reload's log line") { $0.contains("configuration reloaded") }
        #expect(try await daemon.client().greeting.limits.maxPayload == 100, "new connections get the new limit")
        let big = try await daemon.notify(["send", "big", String(repeating: "b", count: 101)])
        #expect(big.status == 65)

        try "max-payload = lots\n".write(toFile: daemon.configurationPath, atomically: true, encoding: .utf8)
        daemon.child.signal(SIGHUP)
        try await notify.wait(for: "READY=1 after the failed reload") { $0.contains("READY=1") }
        try await daemon.child.standardError.wait("the refused reload's log line") {
            $0.contains("configuration not reloaded, the previous one stays in force")
        }
        #expect(try await daemon.client().greeting.limits.maxPayload == 100)
        try await daemon.stop()
    }

    @Test("notifyd --reload (ExecReload=) returns once the new configuration is in force; 78 when it cannot be used")
    func reloadAndWait() async throws {
        let daemon = try await TestDaemon.start()
        func reload() async throws -> (status: Int32, stderr: String) {
            let request = try ChildProcess(Binaries.notifyd, ["--socket", daemon.socketPath, "--reload"])
            let status = try await request.exitStatus()
            try await request.standardError.wait("its errors to end") { _ in request.standardError.isClosed }
            return (status, request.standardError.text)
        }
        // Several rounds: each must see its own reload through, with nothing waited for in between.
        for limit in [100, 200, 300] {
            try "max-payload = \(limit)\n".write(toFile: daemon.configurationPath, atomically: true, encoding: .utf8)
            #expect(try await reload().status == 0)
            #expect(try await daemon.client().greeting.limits.maxPayload == limit, "in force when --reload returns")
        }
        let stats = try await daemon.client().stats()
        #expect(stats["reloads"] == 3 && stats["reloads_failed"] == 0)
        #expect(stats["pid"] == UInt64(daemon.child.pid), "the process --reload signals is the daemon's own")

        try "max-payload = lots\n".write(toFile: daemon.configurationPath, atomically: true, encoding: .utf8)
        let refused = try await reload()
        #expect(refused.status == 78)
        #expect(refused.stderr.contains("notifyd kept its running configuration"))
        #expect(try await daemon.client().greeting.limits.maxPayload == 300)
        #expect(daemon.child.isRunning)
        try await daemon.stop()

        let gone = try await reload()
        #expect(gone.status == 69 && gone.stderr.contains(daemon.socketPath))
    }

    @Test("socket-activated: serves the inherited socket, answers a publish sent before it started, never removes it")
    func socketActivation() async throws {
        let directory = try TemporaryDirectory()
        let socketPath = directory.path + "/activated.sock"
        try Data("# empty\n".utf8).write(to: URL(fileURLWithPath: directory.path + "/notifyd.conf"))
        let activator = try ChildProcess("/usr/bin/systemd-socket-activate", [
            "-l", socketPath, Binaries.notifyd, "--state-dir", directory.path + "/state", "--config", directory.path + "/notifyd.conf",
        ])
        try await activator.standardError.wait("the activator to listen") { $0.contains("Listening on") }
        #expect(!activator.standardError.text.contains("Execing"), "no daemon runs before the first client")

        // This client connects and publishes before notifyd exists: systemd-socket-activate starts it now.
        let early = try RawSocket(path: socketPath)
        try early.send("#1 PUB early.bird 5 ack\nfirst\n")
        #expect(await early.read { String(decoding: $0, as: UTF8.self).contains("#1 OK 1") }, "got \(early.lines)")
        #expect(activator.standardError.text.contains("Execing"))

        let latest = try await notify(["latest", "early.bird"], socket: socketPath)
        #expect(latest.output == "first\n")
        try await activator.standardError.wait("the daemon's log") { $0.contains("activation=socket") && $0.contains(socketPath) }

        activator.signal(SIGTERM)
        #expect(try await activator.exitStatus() == 0)
        #expect(FileManager.default.fileExists(atPath: socketPath), "the socket belongs to whoever passed it")
    }

    @Test("buffered messages and sequence numbers survive a restart, and acknowledged ones survive kill -9")
    func stateAcrossRestarts() async throws {
        let directory = try TemporaryDirectory()
        do {
            let daemon = try await TestDaemon.start(in: directory)
            let client = try await daemon.client()
            try await client.publishAcknowledged("one", to: Topic("kept"))
            try await client.publishAcknowledged("two", to: Topic("kept"))
            try await client.publishAcknowledged("passing", to: Topic("kept"), retain: false)
            await client.close()
            try await daemon.stop()
        }
        do {
            let daemon = try await TestDaemon.start(in: directory)
            let client = try await daemon.client()
            let kept = try #require(try await client.latest(Topic("kept")))
            #expect(kept.text == "two" && kept.sequence == 2)
            #expect(try await client.publishAcknowledged("four", to: Topic("kept")) == 4, "continues exactly after a clean stop")
            for index in 1...200 {
                try await client.publishAcknowledged("crash \(index)", to: Topic("crash.\(index % 10)"))
            }
            try await daemon.kill()
        }
        let daemon = try await TestDaemon.start(in: directory)
        let client = try await daemon.client()
        #expect(try await client.latest(Topic("kept"))?.text == "four")
        for topic in 0..<10 {
            let last = 190 + (topic == 0 ? 10 : topic)
            let latest = try #require(try await client.latest(Topic("crash.\(topic)")))
            #expect(latest.text == "crash \(last)", "every acknowledged publish survived kill -9")
            #expect(latest.sequence == 20)
        }
        let next = try await client.publishAcknowledged("after", to: Topic("crash.0"))
        #expect(next == 21, "retained publishes record their own sequence, so even a crash leaves no gap")
        await client.close()
        try await daemon.stop()
    }
}
