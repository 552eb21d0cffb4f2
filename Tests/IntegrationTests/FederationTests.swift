import Foundation
import NATSClient
import NATSTestSupport
import NIOCore
import NotifyBus
import Testing

/// Several real `notifyd` daemons, one per "host" (`--host-name`), sharing topics through real `nats-server`
/// processes: what crosses, once, with its origin; what never crosses; a host that comes later; outages.
@Suite("Several hosts through NATS (real nats-server and notifyd)", .timeLimit(.minutes(10)))
struct FederationTests {
    /// Starts a daemon for host `name` linked to `servers`, and waits until it is subscribed in NATS (so whatever
    /// another host publishes from then on reaches it) and has read the fleet's latest messages.
    static func startHost(
        _ name: String,
        servers: [NATSServerProcess],
        arguments: [String] = [],
        in directory: TemporaryDirectory? = nil,
        waitForLatest: Bool = true
    ) async throws -> TestDaemon {
        let nats = servers.flatMap { ["--nats", $0.url] }
        let daemon = try await TestDaemon.start(in: directory, arguments: ["--host-name", name] + nats + arguments)
        let sign = waitForLatest ? "read the latest messages of other hosts" : "connected to NATS"
        try await daemon.fleetLog.wait("\(name) to join NATS") { $0.contains(sign) }
        return daemon
    }

    /// Collects what a library subscription delivers until a message of `endTopic` comes.
    static func collect(_ subscription: NotifySubscription, until endTopic: String) async throws -> [Delivery] {
        try await withDeadline(.seconds(30), waitingFor: "a delivery of \(endTopic)") {
            var received: [Delivery] = []
            for try await event in subscription {
                guard case .message(let delivery) = event else { continue }
                received.append(delivery)
                if delivery.topic.name == endTopic { return received }
            }
            throw TestFailure("the subscription ended before \(endTopic); it had \(received)")
        }
    }

    /// Waits until the daemon's counter `name` is at least `value`.
    /// The daemon's counters once `condition` holds of them, or as they are after 10 s: the fleet service's reach the
    /// daemon a few milliseconds after they change, so a test that just acted reads them through this.
    static func stats(of client: NotifyClient, once condition: (ServerStats) -> Bool) async throws -> ServerStats {
        let deadline = ContinuousClock.now + .seconds(10)
        var stats = try await client.stats()
        while !condition(stats), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
            stats = try await client.stats()
        }
        return stats
    }

    static func waitForCounter(_ name: String, toReach value: UInt64, on client: NotifyClient) async throws {
        try await withDeadline(.seconds(30), waitingFor: "\(name) to reach \(value)") {
            while try await client.stats()[name] ?? 0 < value {
                try await Task.sleep(for: .milliseconds(10))
            }
        }
    }

    @Test("a publish on A reaches B's subscriber once, with A's host and sequence; A's own subscriber gets it once; user. topics stay home")
    func acrossHosts() async throws {
        let nats = try await NATSServerProcess.start()
        defer { nats.stop() }
        let alpha = try await Self.startHost("alpha", servers: [nats])
        let beta = try await Self.startHost("beta", servers: [nats])
        let onBeta = try await beta.client()
        let onAlpha = try await alpha.client()
        let betaSubscription = try await onBeta.subscribe(to: [TopicPattern(">")])
        let alphaSubscription = try await onAlpha.subscribe(to: [TopicPattern("fed.>")])

        let json = try startNotify(["subscribe", "fed.job", "--format", "json", "--count", "2"], socket: beta.socketPath)
        try await BackpressureTests.waitForSubscriptions(2, on: onBeta)

        #expect(try await alpha.notify(["send", "fed.job", "one"]).status == 0)
        #expect(try await alpha.notify(["send", "fed.job", "two", "--no-retain"]).status == 0)
        #expect(try await alpha.notify(["send", "user.\(getuid()).secret", "mine"]).status == 0)
        #expect(try await alpha.notify(["send", "fed.end", "done"]).status == 0)

        let atBeta = try await Self.collect(betaSubscription, until: "fed.end")
        #expect(atBeta.map { "\($0.topic.name) \($0.sequence) \($0.text ?? "") \($0.host ?? "-")" } == [
            "fed.job 1 one alpha", "fed.job 2 two alpha", "fed.end 1 done alpha",
        ])
        let atAlpha = try await Self.collect(alphaSubscription, until: "fed.end")
        #expect(atAlpha.map { "\($0.topic.name) \($0.sequence) \($0.text ?? "") \($0.host ?? "-")" } == [
            "fed.job 1 one -", "fed.job 2 two -", "fed.end 1 done -",
        ])
        #expect(try await json.exitStatus() == 0)
        try await json.standardOutput.wait("its output to end") { _ in json.standardOutput.isClosed }
        let lines = json.standardOutput.lines
        #expect(lines.count == 2 && lines.allSatisfy { $0.contains(#""host":"alpha""#) && $0.contains(#""pid":"#) }, "\(lines)")

        let latest = try await beta.notify(["latest", "fed.job", "--format", "json"])
        #expect(latest.output.contains(#""seq":1"#) && latest.output.contains(#""host":"alpha""#) && latest.output.contains(#""payload":"one""#))
        #expect(try await beta.notify(["latest", "user.\(getuid()).secret"]).status != 0, "a user. topic never leaves its host")

        // Once means once: nothing more comes after the end marker (a publish on B is the next thing B's subscriber
        // sees; an echo of alpha's messages, or B's own publish coming back through NATS, would come first or after).
        #expect(try await beta.notify(["send", "fed.last", "from beta"]).status == 0)
        let tail = try await Self.collect(betaSubscription, until: "fed.last")
        #expect(tail.map { "\($0.topic.name) \($0.host ?? "-")" } == ["fed.last -"])
        try await Self.waitForCounter("nats_imported", toReach: 1, on: onAlpha)
        try await Self.waitForCounter("nats_exported", toReach: 3, on: onAlpha)
        let stats = try await onAlpha.stats()
        #expect(stats["nats_connected"] == 1 && stats["nats_exported"] == 3 && stats["nats_imported"] == 1, "\(stats)")
        await onAlpha.close()
        await onBeta.close()
        try await alpha.stop()
        try await beta.stop()
    }

    @Test("--nats-export and --nats-import limit what crosses, each on its side")
    func patterns() async throws {
        let nats = try await NATSServerProcess.start()
        defer { nats.stop() }
        let alpha = try await Self.startHost("alpha", servers: [nats], arguments: ["--nats-export", "fed.public.>"])
        let beta = try await Self.startHost("beta", servers: [nats], arguments: ["--nats-import", "fed.public.a.>"])
        let onBeta = try await beta.client()
        let subscription = try await onBeta.subscribe(to: [TopicPattern("fed.>")])
        for topic in ["fed.private.x", "fed.public.b.x", "fed.public.a.x", "fed.public.a.end"] {
            #expect(try await alpha.notify(["send", topic, "from alpha"]).status == 0)
        }
        let received = try await Self.collect(subscription, until: "fed.public.a.end")
        #expect(received.map(\.topic.name) == ["fed.public.a.x", "fed.public.a.end"])
        #expect(try await onBeta.stats()["nats_import_refused"] == 0)
        let onAlpha = try await alpha.client()
        try await Self.waitForCounter("nats_exported", toReach: 3, on: onAlpha)
        #expect(try await onAlpha.stats()["nats_exported"] == 3, "fed.private.x is not exported")
        await onAlpha.close()
        await onBeta.close()
        try await alpha.stop()
        try await beta.stop()
    }

    @Test("a topic nobody may read here is not exported: every client of the NATS server would read it")
    func exportsFollowReadRules() async throws {
        let nats = try await NATSServerProcess.start()
        defer { nats.stop() }
        let directory = try TemporaryDirectory()
        try "[rules]\nhidden = deny read fed.hidden.> user:nobody\n".write(toFile: directory.path + "/notifyd.conf", atomically: true, encoding: .utf8)
        let alpha = try await Self.startHost("alpha", servers: [nats], in: directory)
        let beta = try await Self.startHost("beta", servers: [nats])
        let onBeta = try await beta.client()
        let subscription = try await onBeta.subscribe(to: [TopicPattern("fed.>")])
        #expect(try await alpha.notify(["send", "fed.hidden.x", "secret"]).status == 0)
        #expect(try await alpha.notify(["send", "fed.open.end", "public"]).status == 0)
        let received = try await Self.collect(subscription, until: "fed.open.end")
        #expect(received.map(\.topic.name) == ["fed.open.end"])
        let onAlpha = try await alpha.client()
        try await Self.waitForCounter("nats_exported", toReach: 1, on: onAlpha)
        let stats = try await onAlpha.stats()
        #expect(stats["nats_not_exported"] == 1 && stats["nats_exported"] == 1, "\(stats)")
        #expect(try await alpha.notify(["latest", "fed.hidden.x"]).output == "secret\n", "the rule is about nobody; the publisher reads it")
        await onAlpha.close()
        await onBeta.close()
        #expect(try await alpha.stop() == 0)
        #expect(try await beta.stop() == 0)
    }

    @Test("$… and user.… topics never reach the NATS server: a raw NATS client sees none, even under a rule that lets everyone read them")
    func staysHomeOnTheWire() async throws {
        let nats = try await NATSServerProcess.start()
        defer { nats.stop() }
        let directory = try TemporaryDirectory()
        let uid = getuid()
        try "[rules]\nopen-inbox = allow read user.\(uid).> everyone\n".write(toFile: directory.path + "/notifyd.conf", atomically: true, encoding: .utf8)
        let alpha = try await Self.startHost("alpha", servers: [nats], in: directory)
        // What every client of the server could read: the live subjects and the stream of latest messages.
        let watcher = try await NATSConnection.connect(host: "127.0.0.1", port: nats.port, name: "watcher")
        let live = try await watcher.subscribe(to: "notifyd.>")
        let latest = try await watcher.subscribe(to: "notifyd-latest.>")
        try await watcher.flush()

        #expect(try await alpha.notify(["send", "user.\(uid).inbox", "mine"]).status == 0)
        #expect(try await alpha.notify(["send", "user.\(uid).inbox", "mine too", "--no-retain"]).status == 0)
        let reserved = try await alpha.notify(["send", "$notifyd.x", "forged"])
        #expect(reserved.status != 0, "only the daemon publishes $ topics: \(reserved.output)")
        #expect(try await alpha.notify(["send", "fed.end", "done"]).status == 0)

        // In order on one connection: whatever went before the marker has come by the time the marker does.
        for (name, subjects) in [("live", live), ("latest", latest)] {
            let seen = try await withDeadline(.seconds(30), waitingFor: "fed.end on the \(name) subjects") {
                var seen: [String] = []
                for try await message in subjects {
                    seen.append(message.subject)
                    if message.subject.hasSuffix(".fed.end") { return seen }
                }
                throw TestFailure("the subscription ended; it had \(seen)")
            }
            #expect(seen == [name == "live" ? "notifyd.fed.end" : "notifyd-latest.fed.end"], "\(name): \(seen)")
        }
        let onAlpha = try await alpha.client()
        #expect(try await onAlpha.stats()["nats_not_exported"] == 0, "not refused by the rules: never offered")
        await onAlpha.close()
        await watcher.close()
        #expect(try await alpha.stop() == 0)
    }

    @Test("a host started later answers latest with the fleet's latest; restarted, it takes nothing in twice")
    func lateHost() async throws {
        let nats = try await NATSServerProcess.start()
        defer { nats.stop() }
        let alpha = try await Self.startHost("alpha", servers: [nats])
        #expect(try await alpha.notify(["send", "fed.status", "v1"]).status == 0)
        #expect(try await alpha.notify(["send", "fed.status", "v2"]).status == 0)
        #expect(try await alpha.notify(["send", "fed.note", "not kept", "--no-retain"]).status == 0)
        let onAlpha = try await alpha.client()
        try await Self.waitForCounter("nats_exported", toReach: 3, on: onAlpha)

        let directory = try TemporaryDirectory()
        let gamma = try await Self.startHost("gamma", servers: [nats], in: directory)
        let latest = try await gamma.notify(["latest", "fed.status", "--format", "json"])
        #expect(latest.status == 0, "\(latest.stderr)")
        #expect(latest.output.contains(#""seq":2"#) && latest.output.contains(#""host":"alpha""#) && latest.output.contains(#""payload":"v2""#), "\(latest.output)")
        #expect(try await gamma.notify(["latest", "fed.note"]).status != 0, "a message sent without retaining is no topic's latest")
        let onGamma = try await gamma.client()
        #expect(try await onGamma.stats()["nats_imported"] == 1)
        await onGamma.close()
        try await gamma.stop()

        let again = try await Self.startHost("gamma", servers: [nats], in: directory)
        let onAgain = try await again.client()
        #expect(try await onAgain.stats()["nats_imported"] == 0, "it holds alpha's latest already: not published twice")
        #expect(try await onAgain.latest(Topic("fed.status"))?.text == "v2")
        await onAgain.close()
        await onAlpha.close()
        try await again.stop()
        try await alpha.stop()
    }

    @Test("CLEAR crosses hosts both ways, and a host that restarts, or starts later, does not take a cleared topic back in")
    func clearAcrossHosts() async throws {
        let nats = try await NATSServerProcess.start()
        defer { nats.stop() }
        let alpha = try await Self.startHost("alpha", servers: [nats])
        let betaDirectory = try TemporaryDirectory()
        let beta = try await Self.startHost("beta", servers: [nats], in: betaDirectory)
        let onAlpha = try await alpha.client()
        let onBeta = try await beta.client()
        #expect(try await alpha.notify(["send", "fed.clear.a", "from alpha"]).status == 0)
        #expect(try await alpha.notify(["send", "fed.clear.b", "also from alpha"]).status == 0)
        #expect(try await alpha.notify(["send", "fed.clear.kept", "stays"]).status == 0)
        try await Self.waitForCounter("nats_imported", toReach: 3, on: onBeta)
        #expect(try await onBeta.latest(Topic("fed.clear.a"))?.text == "from alpha")

        // Cleared where it was published: gone on the other host too.
        #expect(try await alpha.notify(["clear", "fed.clear.a"]).status == 0)
        try await Self.waitForCounter("nats_clears_imported", toReach: 1, on: onBeta)
        #expect(try await onBeta.latest(Topic("fed.clear.a")) == nil)
        // Cleared on a host that took it in: gone where it was published.
        #expect(try await beta.notify(["clear", "fed.clear.b"]).status == 0)
        try await Self.waitForCounter("nats_clears_imported", toReach: 1, on: onAlpha)
        #expect(try await onAlpha.latest(Topic("fed.clear.b")) == nil)
        #expect(try await onAlpha.latest(Topic("fed.clear.kept"))?.text == "stays")

        // beta restarts from its state log (which holds none of them now), and gamma starts later: the stream of
        // latest messages gives back the one kept and none of the cleared.
        await onBeta.close()
        try await beta.stop()
        let again = try await Self.startHost("beta", servers: [nats], in: betaDirectory)
        let gamma = try await Self.startHost("gamma", servers: [nats])
        for host in [again, gamma] {
            let client = try await host.client()
            #expect(try await client.latest(Topic("fed.clear.kept"))?.text == "stays")
            #expect(try await client.latest(Topic("fed.clear.a")) == nil)
            #expect(try await client.latest(Topic("fed.clear.b")) == nil)
            await client.close()
        }
        await onAlpha.close()
        try await again.stop()
        try await gamma.stop()
        try await alpha.stop()
    }

    @Test("a host that was away while a topic was cleared clears its copy when it comes back")
    func clearWhileAway() async throws {
        let nats = try await NATSServerProcess.start()
        defer { nats.stop() }
        let alpha = try await Self.startHost("alpha", servers: [nats])
        let betaDirectory = try TemporaryDirectory()
        let beta = try await Self.startHost("beta", servers: [nats], in: betaDirectory)
        let onBeta = try await beta.client()
        #expect(try await alpha.notify(["send", "fed.away", "soon cleared"]).status == 0)
        try await Self.waitForCounter("nats_imported", toReach: 1, on: onBeta)
        await onBeta.close()
        try await beta.stop()

        #expect(try await alpha.notify(["clear", "fed.away"]).status == 0)
        let onAlpha = try await alpha.client()
        try await Self.waitForCounter("nats_exported", toReach: 2, on: onAlpha)

        let again = try await Self.startHost("beta", servers: [nats], in: betaDirectory)
        let onAgain = try await again.client()
        #expect(try await onAgain.latest(Topic("fed.away")) == nil, "its state log held alpha's message; the stream's clear is newer")
        await onAgain.close()
        await onAlpha.close()
        try await again.stop()
        try await alpha.stop()
    }

    @Test("a burst of notify send --lines fifty times the outbox, NATS up: the fleet service waits for room instead of dropping, and every line reaches the other host once, in order")
    func burstLargerThanTheOutbox() async throws {
        let nats = try await NATSServerProcess.start()
        defer { nats.stop() }
        // 64 KiB: a uid's part (half) holds about 150 of these exports; the burst is about 8 MB.
        let alpha = try await Self.startHost("alpha", servers: [nats], arguments: ["--nats-outbox-bytes", "65536"])
        let beta = try await Self.startHost("beta", servers: [nats])
        let onBeta = try await beta.client()
        let remote = try await onBeta.subscribe(to: [TopicPattern("fed.burst.>")])
        let count = 40_000
        let lines = (1...count).map { "\($0) \(String(repeating: "b", count: 40))\n" }.joined()
        let sent = try await alpha.notify(["send", "fed.burst.m", "--lines", "--no-retain"], input: Array(lines.utf8), timeout: .seconds(120))
        #expect(sent.status == 0, "\(sent.stderr)")
        #expect(try await alpha.notify(["send", "fed.burst.end", "x"]).status == 0)
        let received = try await withDeadline(.seconds(120), waitingFor: "all \(count) lines and fed.burst.end at beta") {
            var received: [String] = []
            for try await event in remote {
                switch event {
                case .message(let delivery) where delivery.topic.name == "fed.burst.end":
                    return received
                case .message(let delivery):
                    received.append(String(String(buffer: delivery.payload).prefix { $0 != " " }))
                default:
                    throw TestFailure("beta's subscriber was told of a loss after \(received.count) lines: \(event)")
                }
            }
            throw TestFailure("the subscription ended after \(received.count) lines")
        }
        #expect(received == (1...count).map { String($0) }, "each once, in order: \(received.count) lines")
        let onAlpha = try await alpha.client()
        let stats = try await onAlpha.stats()
        #expect(stats["nats_outbox_dropped"] == 0 && stats["nats_export_dropped"] == 0, "\(stats)")
        #expect((stats["nats_export_waited"] ?? 0) > 0, "the burst did not fit, and waited: \(stats)")
        await onAlpha.close()
        await onBeta.close()
        try await beta.stop()
        try await alpha.stop()
    }

    @Test("NATS killed and restarted: local traffic goes on, the outbox is sent in order, what overflowed is counted and logged")
    func outage() async throws {
        let nats = try await NATSServerProcess.start()
        let alpha = try await Self.startHost("alpha", servers: [nats], arguments: ["--nats-outbox-bytes", "65536"])
        let beta = try await Self.startHost("beta", servers: [nats])
        let onAlpha = try await alpha.client()
        let onBeta = try await beta.client()
        let remote = try await onBeta.subscribe(to: [TopicPattern("fed.outage.>")])
        let local = try await onAlpha.subscribe(to: [TopicPattern("fed.outage.>")])

        nats.kill()
        try await withDeadline(.seconds(30), waitingFor: "alpha to see NATS gone") {
            while try await onAlpha.stats()["nats_connected"] != 0 { try await Task.sleep(for: .milliseconds(10)) }
        }
        // 1 KiB messages: the 64 KiB outbox holds a few dozen; the rest are counted as not sent.
        let payload = String(repeating: "x", count: 1_000)
        for index in 1...200 {
            _ = try await onAlpha.publishAcknowledged("\(index) \(payload)", to: Topic("fed.outage.m"), retain: false)
        }
        let atHome = try await withDeadline(.seconds(30), waitingFor: "alpha's own subscriber") {
            var count = 0
            for try await event in local {
                if case .message = event { count += 1 }
                if count == 200 { return count }
            }
            return count
        }
        #expect(atHome == 200, "local subscribers do not wait for NATS")
        let stats = try await Self.stats(of: onAlpha) { ($0["nats_outbox_messages"] ?? 0) + ($0["nats_outbox_dropped"] ?? 0) == 200 }
        let held = try #require(stats["nats_outbox_messages"])
        #expect(held > 0 && held < 200 && stats["nats_outbox_dropped"] == 200 - held, "\(stats)")
        try await alpha.fleetLog.wait("the overflow in the journal") { $0.contains("the NATS outbox is full") }

        // Beta first, then alpha: alpha's outbox must find beta subscribed (core NATS keeps nothing for a host that
        // is away; docs/federation.md).
        alpha.fleet!.signal(SIGSTOP)
        let restarted = try await NATSServerProcess.start(port: nats.port, store: nats.store)
        defer { restarted.stop() }
        try await Self.waitForCounter("nats_connects", toReach: 2, on: onBeta)
        alpha.fleet!.signal(SIGCONT)
        try await Self.waitForCounter("nats_connects", toReach: 2, on: onAlpha)
        // The outbox goes out by itself once the server is back, not with the next publish.
        try await withDeadline(.seconds(30), waitingFor: "alpha's outbox to be sent and confirmed") {
            while try await onAlpha.stats()["nats_outbox_messages"] != 0 { try await Task.sleep(for: .milliseconds(10)) }
        }
        _ = try await onAlpha.publishAcknowledged("end", to: Topic("fed.outage.end"))
        let received = try await Self.collect(remote, until: "fed.outage.end")
        let numbers = received.dropLast().map { Int($0.text!.prefix { $0 != " " })! }
        #expect(numbers == Array(1...Int(held)), "the first \(held), in order, once")
        #expect(try await Self.stats(of: onAlpha) { $0["nats_outbox_messages"] == 0 }["nats_outbox_messages"] == 0, "the end confirmed too")
        await onAlpha.close()
        await onBeta.close()
        try await alpha.stop()
        try await beta.stop()
    }

    /// Live only (no catch-up), and through the stream of exports, which in a cluster needs its 3 replicas to outlive
    /// a server.
    @Test(
        "a 3-server cluster loses the server a host uses: the bridge fails over and nothing acknowledged is lost",
        arguments: [["--nats-catch-up", "0"], ["--nats-stream-replicas", "3"]]
    )
    func clusterFailover(options: [String]) async throws {
        let cluster = try await NATSServerProcess.startCluster(count: 3)
        defer { for server in cluster { server.stop() } }
        let alpha = try await Self.startHost("alpha", servers: cluster, arguments: options, waitForLatest: false)
        let beta = try await Self.startHost("beta", servers: [cluster[1]], arguments: options, waitForLatest: false)
        #expect(alpha.log.contains("connected to NATS at \(cluster[0].url)"), "the first server of the list first")
        let onAlpha = try await alpha.client()
        let onBeta = try await beta.client()
        let remote = try await onBeta.subscribe(to: [TopicPattern("fed.failover.>")])
        // Routes carry beta's interest to server 0 soon after the cluster forms; until then alpha's first messages
        // would find no subscriber there. Probe until one gets through.
        try await withDeadline(.seconds(30), waitingFor: "beta's subscription to reach alpha's server") {
            var probe = 0
            while true {
                probe += 1
                _ = try await onAlpha.publishAcknowledged("probe \(probe)", to: Topic("fed.failover.probe"), retain: false)
                if try await onBeta.stats()["nats_imported"] ?? 0 > 0 { return }
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        for index in 1...100 {
            _ = try await onAlpha.publishAcknowledged("\(index)", to: Topic("fed.failover.m"), retain: false)
        }
        cluster[0].kill()
        for index in 101...200 {
            _ = try await onAlpha.publishAcknowledged("\(index)", to: Topic("fed.failover.m"), retain: false)
        }
        _ = try await onAlpha.publishAcknowledged("end", to: Topic("fed.failover.end"))
        let received = try await Self.collect(remote, until: "fed.failover.end")
        let numbers = received.filter { $0.topic.name == "fed.failover.m" }.map { Int($0.text!)! }
        #expect(numbers == Array(1...200), "all, in order, once")
        try await alpha.fleetLog.wait("alpha on another server") {
            $0.contains("connected to NATS at \(cluster[1].url)") || $0.contains("connected to NATS at \(cluster[2].url)")
        }
        let server = try await Self.stats(of: onAlpha) { [2, 3].contains($0["nats_server"]) }["nats_server"]
        #expect(server == 2 || server == 3, "its place in the list: \(String(describing: server))")
        await onAlpha.close()
        await onBeta.close()
        try await alpha.stop()
        try await beta.stop()
    }

    @Test("[nats] in the configuration file: STATUS= shows the bridge, SIGHUP applies new patterns, and removing the section leaves NATS")
    func configurationAndReload() async throws {
        let nats = try await NATSServerProcess.start()
        defer { nats.stop() }
        let directory = try TemporaryDirectory()
        let configuration = directory.path + "/notifyd.conf"
        func configure(_ text: String) {
            _ = FileManager.default.createFile(atPath: configuration, contents: Data(text.utf8))
        }
        configure("[nats]\nservers = \(nats.url)\nhost-name = alpha\nexport = fed.one.>\n")
        let listener = try NotifySocketListener(path: directory.path + "/notify.sock")
        let alpha = try await TestDaemon.start(in: directory, environment: SystemdIntegrationTests.environment(["NOTIFY_SOCKET": listener.path]))
        try await alpha.fleetLog.wait("alpha to join NATS") { $0.contains("read the latest messages of other hosts") }
        let beta = try await Self.startHost("beta", servers: [nats])
        let onBeta = try await beta.client()
        let subscription = try await onBeta.subscribe(to: [TopicPattern("fed.>")])

        let status = try await listener.wait(for: "a STATUS= naming the NATS server") {
            field("STATUS", in: $0)?.hasPrefix("NATS \(nats.url): ") == true
        }
        #expect(field("STATUS", in: status)?.hasSuffix("0 out, 0 in, outbox 0") == true, "\(status)")

        #expect(try await alpha.notify(["send", "fed.two.x", "not exported"]).status == 0)
        #expect(try await alpha.notify(["send", "fed.one.end", "exported"]).status == 0)
        #expect(try await Self.collect(subscription, until: "fed.one.end").map(\.topic.name) == ["fed.one.end"])

        configure("[nats]\nservers = \(nats.url)\nhost-name = alpha\nexport = fed.two.>\n")
        alpha.fleet!.signal(SIGHUP)
        try await alpha.fleetLog.wait("the reload") { $0.contains("configuration reloaded") }
        #expect(try await alpha.notify(["send", "fed.one.x", "no longer exported"]).status == 0)
        #expect(try await alpha.notify(["send", "fed.two.end", "exported now"]).status == 0)
        #expect(try await Self.collect(subscription, until: "fed.two.end").map(\.topic.name) == ["fed.two.end"])

        // Another host name takes a new connection: what comes after it carries the new name.
        configure("[nats]\nservers = \(nats.url)\nhost-name = alpha-2\nexport = fed.two.>\n")
        alpha.fleet!.signal(SIGHUP)
        try await alpha.fleetLog.wait("the second reload and a new connection") {
            $0.components(separatedBy: "configuration reloaded").count == 3 && $0.contains("as host alpha-2, subscribed")
        }
        #expect(try await alpha.notify(["send", "fed.two.renamed", "from alpha-2"]).status == 0)
        #expect(try await Self.collect(subscription, until: "fed.two.renamed").map { $0.host } == ["alpha-2"])

        // A file that names no server is not one the fleet service can run on: the running settings stay.
        configure("# no NATS\n")
        alpha.fleet!.signal(SIGHUP)
        try await alpha.fleetLog.wait("the refused reload") {
            $0.contains("configuration not reloaded, the previous one stays in force") && $0.contains("names no NATS server")
        }
        let onAlpha = try await alpha.client()
        #expect(try await onAlpha.stats()["nats_connected"] == 1)
        // Stopped, the fleet service leaves NATS, and the daemon shows no counters of a fleet that is gone.
        alpha.fleet!.signal(SIGTERM)
        #expect(try await alpha.fleet!.exitStatus() == 0)
        #expect(alpha.fleetLog.text.contains("left NATS (the link is stopped)"))
        try await withDeadline(.seconds(30), waitingFor: "the daemon to see the fleet service gone") {
            while try await onAlpha.stats()["fleet_linked"] != 0 { try await Task.sleep(for: .milliseconds(10)) }
        }
        #expect(try await onAlpha.stats()["nats_connected"] == nil, "no fleet, no fleet counters")
        await onAlpha.close()
        await onBeta.close()
        alpha.child.signal(SIGTERM)
        #expect(try await alpha.child.exitStatus() == 0)
        try await beta.stop()
    }

    @Test("a message over the NATS server's max_payload is counted and logged, not sent, and the link stays up")
    func tooLargeForNATS() async throws {
        let nats = try await NATSServerProcess.start()
        defer { nats.stop() }
        let alpha = try await Self.startHost("alpha", servers: [nats], arguments: ["--max-payload", "2097152"])
        let beta = try await Self.startHost("beta", servers: [nats])
        let onAlpha = try await alpha.client()
        let onBeta = try await beta.client()
        let subscription = try await onBeta.subscribe(to: [TopicPattern("fed.>")])
        let big = ByteBuffer(repeating: UInt8(ascii: "x"), count: 1_500_000)
        _ = try await onAlpha.publishAcknowledged(big, to: Topic("fed.big"))
        _ = try await onAlpha.publishAcknowledged("small", to: Topic("fed.small"))
        #expect(try await Self.collect(subscription, until: "fed.small").map(\.topic.name) == ["fed.small"])
        let stats = try await Self.stats(of: onAlpha) { $0["nats_too_large"] == 1 }
        #expect(stats["nats_too_large"] == 1 && stats["nats_connects"] == 1 && stats["nats_connected"] == 1, "\(stats)")
        #expect(alpha.log.contains("over the NATS server's max_payload (1048576)"))
        await onAlpha.close()
        await onBeta.close()
        try await alpha.stop()
        try await beta.stop()
    }

    @Test("another host's messages are published as nobody's: a root-only system.… topic is refused here, and counted")
    func importedAsNobody() async throws {
        try #require(getuid() == 0, "publishing system.… on the first host needs root")
        let nats = try await NATSServerProcess.start()
        defer { nats.stop() }
        let alpha = try await Self.startHost("alpha", servers: [nats])
        let beta = try await Self.startHost("beta", servers: [nats])
        let onBeta = try await beta.client()
        let subscription = try await onBeta.subscribe(to: [TopicPattern("system.>"), TopicPattern("fed.>")])
        #expect(try await alpha.notify(["send", "system.fed.x", "root's, on alpha"]).status == 0)
        #expect(try await alpha.notify(["send", "fed.end", "anyone's"]).status == 0)
        let received = try await Self.collect(subscription, until: "fed.end")
        #expect(received.map(\.topic.name) == ["fed.end"] && received.first?.publisher.uid == 0, "uid as on alpha")
        try await Self.waitForCounter("nats_import_refused", toReach: 1, on: onBeta)
        try await beta.fleetLog.wait("the refusal logged") { $0.contains("IMPORT of system.fed.x from alpha") && $0.contains("not taken in") }
        await onBeta.close()
        try await alpha.stop()
        try await beta.stop()
    }

    @Test("a plain NATS client publishing under the prefix reaches local subscribers, stamped host nats; $ and user. subjects never do")
    func plainNATSClient() async throws {
        let nats = try await NATSServerProcess.start()
        defer { nats.stop() }
        let beta = try await Self.startHost("beta", servers: [nats])
        let onBeta = try await beta.client()
        let subscription = try await onBeta.subscribe(to: [TopicPattern(">")])
        let client = try await NATSConnection.connect(host: "127.0.0.1", port: nats.port, name: "plain")
        for subject in ["notifyd.$notifyd.x", "notifyd.user.0.x", "notifyd.fed.plain"] {
            try await client.publish(ByteBuffer(string: "from a NATS client"), to: subject)
        }
        try await client.flush()
        let received = try await Self.collect(subscription, until: "fed.plain")
        #expect(received.map { "\($0.topic.name) \($0.host ?? "-") \($0.sequence)" } == ["fed.plain nats 1"])
        #expect(try await onBeta.latest(Topic("fed.plain"))?.text == "from a NATS client", "retained, as notify send does")
        await client.close()
        await onBeta.close()
        try await beta.stop()
    }
}
