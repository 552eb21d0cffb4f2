import Foundation
import NIOCore
import NotifyBus
import Testing

/// The `notify` command against a real daemon: what it prints and what its exit status means.
@Suite("notify against a real notifyd", .timeLimit(.minutes(10)))
struct CLITests {
    @Test("send, latest, clear: the README's round trip")
    func sendLatestClear() async throws {
        let daemon = try await TestDaemon.start()
        let sent = try await daemon.notify(["send", "demo.hello", "world"])
        #expect(sent.status == 0 && sent.stderr.isEmpty)

        let latest = try await daemon.notify(["latest", "demo.hello"])
        #expect(latest.status == 0)
        #expect(latest.output == "world\n")

        #expect(try await daemon.notify(["clear", "demo.hello"]).status == 0)
        let cleared = try await daemon.notify(["latest", "demo.hello"])
        #expect(cleared.status == 1, "exit 1: nothing buffered")
        #expect(cleared.output.isEmpty)
        #expect(cleared.stderr.contains("nothing is buffered for topic \"demo.hello\""))
        try await daemon.stop()
    }

    @Test("the README's Try it, as an ordinary user with no options: the per-user socket, subscribe, send, latest", .enabled(if: getuid() == 0))
    func readmeTryIt() async throws {
        // A user's session as the README assumes it: $XDG_RUNTIME_DIR set, nothing else; `notifyd` and `notify`
        // run without options or $NOTIFYD_SOCKET, as nobody (setpriv; root only, as in CI).
        let home = try TemporaryDirectory()
        chown(home.path, 65534, 65534)
        chmod(home.path, 0o700)
        var environment = ProcessInfo.processInfo.environment
        environment[SocketPath.environmentVariable] = nil
        environment["XDG_RUNTIME_DIR"] = home.path
        environment["HOME"] = home.path
        environment["XDG_STATE_HOME"] = home.path + "/state"
        environment["XDG_CONFIG_HOME"] = home.path + "/config"
        let daemon = try Self.asNobody(environment, Binaries.notifyd, [])
        try await daemon.standardError.wait("notifyd to listen") { $0.contains("listening") }
        #expect(daemon.standardError.text.contains("socket=\(home.path)/notifyd/notifyd.sock"), "the per-user socket")

        let subscriber = try Self.asNobody(environment, Binaries.notify, ["subscribe", "demo.>"])
        // Until the subscriber shows a message, it may not be subscribed yet: send until it does (each send is
        // acknowledged), then check what it printed first.
        let subscribed = Shared(false)
        let sender = Task {
            for _ in 0..<2_000 {
                if subscribed.value { break }
                let send = try Self.asNobody(environment, Binaries.notify, ["send", "demo.hello", "world"])
                #expect(try await send.exitStatus() == 0)
            }
        }
        try await subscriber.standardOutput.wait("the subscriber's first message") { $0.contains("\n") }
        subscribed.withLock { $0 = true }
        try await sender.value
        #expect(subscriber.standardOutput.lines.first == "demo.hello world")

        let latest = try Self.asNobody(environment, Binaries.notify, ["latest", "demo.hello"])
        #expect(try await latest.exitStatus() == 0)
        try await latest.standardOutput.wait("latest's output to end") { _ in latest.standardOutput.isClosed }
        #expect(latest.standardOutput.text == "world\n")

        subscriber.signal(SIGINT)
        _ = try await subscriber.exitStatus()
        daemon.signal(SIGTERM)
        #expect(try await daemon.exitStatus() == 0)
        #expect(!FileManager.default.fileExists(atPath: home.path + "/notifyd/notifyd.sock"), "the socket is gone with it")
    }

    @Test("send reads stdin byte for byte when no message is given; --no-retain keeps the buffered message")
    func stdinAndNoRetain() async throws {
        let daemon = try await TestDaemon.start()
        let binary: [UInt8] = [0, 1, 2, 0xFF, 0x0A, 0x0D, 0x20]
        #expect(try await daemon.notify(["send", "bin"], input: binary).status == 0)
        let json = try await daemon.notify(["latest", "bin", "--format", "json"])
        #expect(json.output.contains("\"payload_base64\":\"AAEC/woNIA==\""))
        #expect(!json.output.contains("\"payload\":"))

        #expect(try await daemon.notify(["send", "text", "kept"]).status == 0)
        #expect(try await daemon.notify(["send", "text", "passing", "--no-retain"]).status == 0)
        #expect(try await daemon.notify(["latest", "text"]).output == "kept\n")
        let topics = try await daemon.notify(["topics", "--format", "json"])
        #expect(topics.output.contains("{\"topic\":\"text\",\"seq\":2,\"retained_bytes\":4,\"published\":2,\"delivered\":0,"))
        try await daemon.stop()
    }

    @Test("latest --format json prints topic, seq, RFC 3339 time, uid, pid, unit and payload")
    func latestJSON() async throws {
        let daemon = try await TestDaemon.start()
        let client = try await daemon.client()
        try await client.publishAcknowledged("say \"hi\"\n", to: Topic("j.k"))
        let result = try await daemon.notify(["latest", "j.k", "--format", "json"])
        let object = try #require(JSONSerialization.jsonObject(with: Data(result.stdout)) as? [String: Any])
        #expect(object["topic"] as? String == "j.k")
        #expect(object["seq"] as? Int == 1)
        #expect(object["payload"] as? String == "say \"hi\"\n")
        #expect(object["uid"] as? Int == Int(getuid()))
        #expect(object["pid"] as? Int == Int(getpid()), "the publisher is this test process, per SO_PEERCRED")
        #expect(object.keys.contains("unit"))
        let time = try #require(object["time"] as? String)
        #expect(time.hasSuffix("Z") && time.count == "2026-11-22T00:00:00.000000Z".count)
        await client.close()
        try await daemon.stop()
    }

    @Test("subscribe with * and > patterns prints what matches, flushed per message, in the chosen format")
    func subscribePatterns() async throws {
        let daemon = try await TestDaemon.start()
        // The marker proves the subscription is in place before the test publishes: --latest delivers it first.
        #expect(try await daemon.notify(["send", "a.ready", "marker"]).status == 0)
        let subscriber = try startNotify(["subscribe", "a.ready", "a.*.c", "a.x.>", "--latest", "--count", "5"], socket: daemon.socketPath)
        try await subscriber.standardOutput.wait("the subscriber to start") { $0.contains("a.ready marker") }
        for (topic, message) in [("a.b.c", "1"), ("a.b", "no"), ("a.x.y", "2"), ("a.x.y.z", "3"), ("a.x", "no"), ("b.b.c", "no"), ("a.q.c", "4")] {
            #expect(try await daemon.notify(["send", topic, message]).status == 0)
        }
        #expect(try await subscriber.exitStatus() == 0)
        try await subscriber.standardOutput.wait("its output to end") { _ in subscriber.standardOutput.isClosed }
        #expect(subscriber.standardOutput.lines == ["a.ready marker", "a.b.c 1", "a.x.y 2", "a.x.y.z 3", "a.q.c 4"])
        try await daemon.stop()
    }

    @Test("subscribe output reaches a pipe as each message comes, before the subscriber exits")
    func subscribeIsUnbuffered() async throws {
        let daemon = try await TestDaemon.start()
        #expect(try await daemon.notify(["send", "p.start", "go"]).status == 0)
        let subscriber = try startNotify(["subscribe", "p.>", "--latest", "--format", "raw"], socket: daemon.socketPath)
        try await subscriber.standardOutput.wait("the marker") { $0 == "go\n" }
        #expect(try await daemon.notify(["send", "p.one", "first"]).status == 0)
        try await subscriber.standardOutput.wait("the first message while the subscriber runs") { $0 == "go\nfirst\n" }
        subscriber.signal(SIGTERM)
        _ = try await subscriber.exitStatus()
        try await daemon.stop()
    }

    @Test("subscribe exits 0 as soon as the reader of its output goes away, without waiting for another message")
    func subscribeStopsWhenItsReaderLeaves() async throws {
        let daemon = try await TestDaemon.start()
        #expect(try await daemon.notify(["send", "h.one", "first"]).status == 0)
        // `head -1` exits after the buffered message; no other message ever comes to make a write fail.
        let pipeline = try startNotifyInShell("\"$0\" subscribe 'h.>' --latest | head -1", socket: daemon.socketPath)
        #expect(try await pipeline.exitStatus(timeout: .seconds(30)) == 0, "notify exited, and with 0")
        try await pipeline.standardOutput.wait("its output to end") { _ in pipeline.standardOutput.isClosed }
        #expect(pipeline.standardOutput.text == "h.one first\n")
        try await daemon.stop()
    }

    @Test("wait prints the buffered message if it matches, else the next one that does; 124 on timeout")
    func waitCommand() async throws {
        let daemon = try await TestDaemon.start()
        #expect(try await daemon.notify(["send", "job.state", "running"]).status == 0)
        let already = try await daemon.notify(["wait", "job.state"])
        #expect(already.status == 0 && already.output == "running\n")

        let waiter = try startNotify(["wait", "job.state", "--equals", "done"], socket: daemon.socketPath)
        #expect(try await daemon.notify(["send", "job.state", "still running"]).status == 0)
        #expect(try await daemon.notify(["send", "job.state", "done"]).status == 0)
        #expect(try await waiter.exitStatus() == 0)
        try await waiter.standardOutput.wait("the waiter's output to end") { _ in waiter.standardOutput.isClosed }
        #expect(waiter.standardOutput.text == "done\n")

        let timedOut = try await daemon.notify(["wait", "job.state", "--equals", "never", "--timeout", "0.2"])
        #expect(timedOut.status == 124)
        let subscribeTimeout = try await daemon.notify(["subscribe", "quiet", "--count", "1", "--timeout", "0.2"])
        #expect(subscribeTimeout.status == 124)
        let subscribeWindow = try await daemon.notify(["subscribe", "quiet", "--timeout", "0.2"])
        #expect(subscribeWindow.status == 0, "without --count, the timeout is the planned end")
        try await daemon.stop()
    }

    @Test("topics and stats, as tables and as JSON")
    func topicsAndStats() async throws {
        let daemon = try await TestDaemon.start()
        for topic in ["t.one", "t.two", "other"] { #expect(try await daemon.notify(["send", topic, "x"]).status == 0) }
        let table = try await daemon.notify(["topics", "t.>"])
        #expect(table.status == 0)
        let rows = table.output.split(separator: "\n")
        #expect(rows.count == 3 && rows[0].hasPrefix("TOPIC") && rows[1].hasPrefix("t.one") && rows[2].hasPrefix("t.two"))
        let stats = try await daemon.notify(["stats", "--format", "json"])
        let object = try #require(JSONSerialization.jsonObject(with: Data(stats.stdout)) as? [String: Any])
        #expect(object["topics"] as? Int == 3 && object["messages_in"] as? Int == 3 && object["connections"] as? Int == 1)
        #expect(try await daemon.notify(["stats"]).output.contains("retained_bytes"))
        try await daemon.stop()
    }

    @Test("exit statuses: 65 invalid input, 77 not permitted, 69 unreachable, 64 usage")
    func exitStatuses() async throws {
        let daemon = try await TestDaemon.start(arguments: ["--max-payload", "10"])
        let badTopic = try await daemon.notify(["send", "a..b", "x"])
        #expect(badTopic.status == 65 && badTopic.stderr.contains("empty token"))
        let badPattern = try await daemon.notify(["subscribe", "a.>.b"])
        #expect(badPattern.status == 65)
        let tooLarge = try await daemon.notify(["send", "big", "more than ten bytes"])
        #expect(tooLarge.status == 65 && tooLarge.stderr.contains("at most 10 bytes"))
        let tooMuchInput = try await daemon.notify(["send", "big"], input: Array(repeating: UInt8(ascii: "x"), count: 100_000))
        #expect(tooMuchInput.status == 65 && tooMuchInput.stderr.contains("standard input holds more than 10 bytes"))
        let reserved = try await daemon.notify(["send", "$notifyd.x", "x"])
        #expect(reserved.status == 77 && reserved.stderr.contains("reserved"))
        let usage = try await daemon.notify(["send"])
        #expect(usage.status == 64)
        let unknown = try await daemon.notify(["frobnicate"])
        #expect(unknown.status == 64)
        try await daemon.stop()

        let gone = try await notify(["send", "a", "b"], socket: daemon.socketPath)
        #expect(gone.status == 69)
        #expect(gone.stderr.contains(daemon.socketPath) && gone.stderr.contains("start it with `notifyd`"), "$NOTIFYD_SOCKET: notifyd takes it too")
        let elsewhere = daemon.socketPath + ".other"
        let goneElsewhere = try await notify(["--socket", elsewhere, "send", "a", "b"], socket: daemon.socketPath)
        #expect(goneElsewhere.status == 69)
        #expect(goneElsewhere.stderr.contains("start it with `notifyd --socket \(elsewhere)`"), "\(goneElsewhere.stderr)")
    }

    @Test("the quick send path and the argument parser's behave the same")
    func quickPathMatchesParser() async throws {
        let daemon = try await TestDaemon.start(arguments: ["--max-payload", "10"])
        // Each pair: a form the quick path takes, and the same request in a form only the parser takes (an
        // option spelled differently, or after `--`).
        let pairs: [([String], [String])] = [
            (["send", "q.a", "one"], ["send", "--", "q.a", "one"]),
            (["send", "a..b", "x"], ["send", "--", "a..b", "x"]),
            (["send", "$x", "x"], ["send", "--", "$x", "x"]),
            (["send", "q.b", "far too long for ten"], ["send", "--", "q.b", "far too long for ten"]),
            (["send", "q.c", "x", "--no-retain"], ["send", "--no-retain", "--", "q.c", "x"]),
            (["--socket", daemon.socketPath, "send", "q.d", "x"], ["send", "--socket=\(daemon.socketPath)", "--", "q.d", "x"]),
            (["send", "--socket", "/nonexistent.sock", "q.e", "x"], ["--socket", "/nonexistent.sock", "send", "--", "q.e", "x"]),
        ]
        for (quick, parsed) in pairs {
            let a = try await daemon.notify(quick)
            let b = try await daemon.notify(parsed)
            #expect(a.status == b.status, "\(quick) vs \(parsed)")
            #expect(a.stderr == b.stderr, "\(quick) vs \(parsed)")
        }
        let retained = try await daemon.notify(["latest", "q.c"])
        #expect(retained.status == 1, "--no-retain on both paths")
        try await daemon.stop()
    }

    @Test("output that cannot be written is exit 74, not a silent success; a reader that left is not an error")
    func unwritableOutput() async throws {
        let daemon = try await TestDaemon.start()
        #expect(try await daemon.notify(["send", "full.x", "payload"]).status == 0)
        for command in ["latest full.x", "subscribe 'full.>' --latest --count 1", "topics", "stats"] {
            let shell = try startNotifyInShell("\"$0\" \(command) >/dev/full", socket: daemon.socketPath)
            #expect(try await shell.exitStatus() == 74, "\(command)")
            try await shell.standardError.wait("its errors to end") { _ in shell.standardError.isClosed }
            #expect(shell.standardError.text.contains("cannot write to standard output: No space left on device"), "\(command)")
        }
        let reader = try startNotifyInShell("\"$0\" topics | true", socket: daemon.socketPath)
        #expect(try await reader.exitStatus() == 0)
        try await daemon.stop()
    }

    @Test("send --lines with a line refused: exit 75, which refusal, and that the other lines were accepted")
    func linesWithARefusal() async throws {
        let daemon = try await TestDaemon.start(arguments: ["--max-retained-bytes", "10", "--max-retained-bytes-per-user", "10"])
        let result = try await daemon.notify(["send", "few", "--lines"], input: Array("aaaa\nbbbbbbbbbbbbbbbb\ncc\n".utf8))
        #expect(result.status == 75)
        #expect(result.stderr.contains("buffering this 16-byte message would take the daemon past 10 bytes"))
        #expect(result.stderr.contains("(3 lines were sent; those not refused were accepted)"))
        #expect(try await daemon.notify(["latest", "few"]).output == "cc\n", "the line after the refused one went through")
        try await daemon.stop()
    }

    @Test("send --lines delivers 10,000 lines as 10,000 messages, in order, over one connection")
    func tenThousandLines() async throws {
        let daemon = try await TestDaemon.start()
        let client = try await daemon.client()
        let subscription = try await client.subscribe(to: [TopicPattern("lines")])
        let count = 10_000
        let input = (1...count).map { "line \($0)" }.joined(separator: "\n") + "\n"
        let before = try await client.stats()["connections_total"]
        let sender = try await daemon.notify(["send", "lines", "--lines"], input: Array(input.utf8))
        #expect(sender.status == 0, "\(sender.stderr)")
        let received = try await deliveries(of: subscription, waitingFor: "\(count) lines") { $0.count == count }.map { $0.text ?? "" }
        #expect(received == (1...count).map { "line \($0)" })
        let stats = try await client.stats()
        #expect(stats["connections"] == 1, "the sender closed its connection")
        #expect(stats["connections_total"] == before.map { $0 + 1 }, "the sender used one connection for all the lines")
        await client.close()
        try await daemon.stop()
    }

    @Test("SIGTERM with subscribers that never read: the daemon gives them 5 s together, not one after another, and exits 0")
    func shutdownWithStalledSubscribers() async throws {
        let daemon = try await TestDaemon.start(arguments: ["--max-queued-messages", "5", "--max-queued-bytes", "1048576"])
        #expect(try await daemon.notify(["send", "slow.ready", "go"]).status == 0)
        var stalled: [ChildProcess] = []
        for _ in 0..<4 {
            let subscriber = try startNotify(["subscribe", "slow.>", "--latest", "--no-reconnect"], socket: daemon.socketPath)
            try await subscriber.standardOutput.wait("a subscriber to start") { $0.contains("go") }
            subscriber.signal(SIGSTOP)
            stalled.append(subscriber)
        }
        let publisher = try await daemon.client()
        let payload = ByteBuffer(repeating: UInt8(ascii: "s"), count: 32 << 10)
        for _ in 0..<300 { try await publisher.publish(payload, to: Topic("slow.data"), retain: false) }
        try await publisher.flush()
        await publisher.close()

        let clock = ContinuousClock()
        let asked = clock.now
        daemon.child.signal(SIGTERM)
        // Without the bound it would wait for the stopped subscribers forever; one after another, four graces (20 s).
        // Measured against that, not against the clock: together they take one grace, and a machine four times
        // slower than usual still tells the two apart.
        #expect(try await daemon.child.exitStatus(timeout: .seconds(60)) == 0)
        let took = clock.now - asked
        #expect(took < .seconds(4 * 5), "took \(took): the graces ran one after another")
        #expect(daemon.log.contains("stopped"))
        for subscriber in stalled {
            subscriber.signal(SIGCONT)
            #expect(try await subscriber.exitStatus() == 69, "the subscriber learns the daemon went away")
        }
    }

    @Test("--log-level chooses what reaches the log: notice hides info, debug shows refusals of bad input")
    func logLevel() async throws {
        for level in ["notice", "debug"] {
            let daemon = try await TestDaemon.start(arguments: ["--log-level", level])
            // Sent raw: notify itself would refuse the topic before asking the daemon.
            let raw = try RawSocket(path: daemon.socketPath)
            try raw.send("PUB a..b 1\nx\nPING\n")
            #expect(await raw.read { String(decoding: $0, as: UTF8.self).contains("PONG") })
            #expect(try await daemon.stop() == 0)
            #expect(daemon.log.contains("listening") && daemon.log.contains("stopped"), "notice and above: always")
            #expect(daemon.log.contains("state loaded") == (level == "debug"), "info: not at notice")
            #expect(daemon.log.contains("refused: topic \"a..b\" has an empty token") == (level == "debug"), "debug")
        }
    }
}

extension CLITests {
    /// Starts `binary` as nobody (uid and gid 65534, no supplementary groups) with `environment`.
    static func asNobody(_ environment: [String: String], _ binary: String, _ arguments: [String]) throws -> ChildProcess {
        try ChildProcess("/usr/bin/setpriv", ["--reuid", "65534", "--regid", "65534", "--clear-groups", binary] + arguments, environment: environment)
    }

    /// A daemon with a queue of five messages (and 1 MiB waiting) per subscriber; a `notify subscribe slow.>` with `options`, stopped
    /// (SIGSTOP) once it runs, so it reads nothing; and a publisher that has sent it 300 messages of 32 KiB, more
    /// than the kernel's and the daemon's buffers hold. The caller continues the subscriber (SIGCONT).
    static func overwhelmedSubscriber(_ options: [String]) async throws -> (TestDaemon, ChildProcess, NotifyClient) {
        let daemon = try await TestDaemon.start(arguments: ["--max-queued-messages", "5", "--max-queued-bytes", "1048576"])
        #expect(try await daemon.notify(["send", "slow.ready", "go"]).status == 0)
        let subscriber = try startNotify(["subscribe", "slow.>", "--latest"] + options, socket: daemon.socketPath)
        try await subscriber.standardOutput.wait("the subscriber to start") { $0.contains("go") }
        subscriber.signal(SIGSTOP)
        let publisher = try await daemon.client()
        let payload = ByteBuffer(repeating: UInt8(ascii: "s"), count: 32 << 10)
        for _ in 0..<300 { try await publisher.publish(payload, to: Topic("slow.data"), retain: false) }
        try await publisher.flush()
        return (daemon, subscriber, publisher)
    }

    @Test("a subscriber that falls behind is told what was dropped: on stderr, or as a JSON record", arguments: ["line", "json"])
    func dropNotices(format: String) async throws {
        let (daemon, subscriber, publisher) = try await Self.overwhelmedSubscriber(["--format", format])
        #expect(try await publisher.stats()["dropped"].map { $0 > 0 } == true)
        try await daemon.child.standardError.wait("the drops logged") { $0.contains("messages for a subscriber that fell behind") }
        subscriber.signal(SIGCONT)
        if format == "json" {
            try await subscriber.standardOutput.wait("a dropped record") { $0.contains("{\"dropped\":{\"topic\":\"slow.data\",\"count\":") }
        } else {
            try await subscriber.standardError.wait("a drop notice") {
                $0.contains("notify: the daemon dropped") && $0.contains("messages of slow.data (sequence ")
                    && $0.contains(") because this subscriber fell behind")
            }
        }
        subscriber.signal(SIGTERM)
        _ = try await subscriber.exitStatus()
        await publisher.close()
        try await daemon.stop()
    }

    @Test("subscribe --overflow disconnect: a subscriber that falls behind is disconnected, says so and exits 69")
    func disconnectedSubscriber() async throws {
        let (daemon, subscriber, publisher) = try await Self.overwhelmedSubscriber(["--overflow", "disconnect"])
        try await daemon.child.standardError.wait("the disconnection logged") { $0.contains("disconnected a subscriber that fell behind") }
        subscriber.signal(SIGCONT)
        #expect(try await subscriber.exitStatus() == 69)
        try await subscriber.standardError.wait("the reason") { $0.contains("the daemon closed the connection") }
        #expect(try await publisher.stats()["connections"] == 1, "the publisher stays connected")
        await publisher.close()
        try await daemon.stop()
    }
}
