import Foundation
import NATSTestSupport
import NATSClient
import NIOCore
import NotifyBus
import Testing

/// The fleet service as a process of its own (issue 47): real `notifyd`, `notifyd-fleet` and `nats-server`. A crash
/// of the fleet service costs local traffic nothing; the daemon lets only its fleet user in.
@Suite("The fleet service, its own process (real notifyd, notifyd-fleet and nats-server)", .timeLimit(.minutes(5)))
struct FleetServiceTests {
    @Test("kill -9 of the fleet service under load: every local publish reaches the local subscriber, in order; the daemon sees it gone; started again, it carries messages across again")
    func crashUnderLoad() async throws {
        let nats = try await NATSServerProcess.start()
        defer { nats.stop() }
        // Room for the whole run in the local subscriber's queue: a test runner too busy to read (CI runs suites side
        // by side) must not make the daemon drop for it what this test counts. Here the fleet service runs as the
        // subscriber's user (packaged, it has a user of its own): the user's share must hold its backlog too.
        let roomy = [
            "--max-queued-messages", "1000000", "--max-queued-bytes", "268435456",
            "--max-queued-bytes-per-user", "1073741824", "--max-queued-bytes-total", "2147483648",
        ]
        let alpha = try await FederationTests.startHost("alpha", servers: [nats], arguments: roomy)
        let beta = try await FederationTests.startHost("beta", servers: [nats])
        let onAlpha = try await alpha.client()
        // And room in the library's own buffer: a consumer the runner starves must not make the client drop either.
        let local = try await onAlpha.subscribe(to: [TopicPattern("load.>")], buffer: SubscriptionBufferLimits(highEvents: 100_000, highBytes: 64 << 20))
        let publisher = try await alpha.client()
        let count = 20_000
        // Read as they come; a drop the daemon announces would show why a number is missing.
        let collecting = Task {
            try await withDeadline(.seconds(60), waitingFor: "load.end at the local subscriber") {
                var numbers: [Int] = []
                var drops: [DropNotice] = []
                for try await event in local {
                    switch event {
                    case .message(let delivery):
                        if delivery.topic.name == "load.end" { return (numbers, drops) }
                        if let number = delivery.text.flatMap(Int.init) { numbers.append(number) }
                    case .dropped(let notice):
                        drops.append(notice)
                    }
                }
                throw TestFailure("the subscription ended before load.end")
            }
        }
        let publishing = Task {
            for index in 1...count { try await publisher.publish("\(index)", to: Topic("load.m"), retain: false) }
            _ = try await publisher.publishAcknowledged("end", to: Topic("load.end"))
        }
        // Killed while the publishes go on: some went out through it, the rest find it gone.
        try await FederationTests.waitForCounter("messages_in", toReach: UInt64(count / 4), on: onAlpha)
        let fleet = try #require(alpha.fleet)
        fleet.signal(SIGKILL)
        _ = try await fleet.exitStatus()
        try await publishing.value
        let (numbers, drops) = try await collecting.value
        let missing = Set(1...count).subtracting(numbers)
        let inOrder = zip(numbers, numbers.dropFirst()).allSatisfy { $0 < $1 }
        #expect(
            missing.isEmpty && numbers.count == count && inOrder,
            "every local publish, in order, once: \(numbers.count) received, \(missing.count) missing (\(missing.min() ?? 0) to \(missing.max() ?? 0)), in order: \(inOrder), drops announced: \(drops)"
        )
        #expect(try await FederationTests.stats(of: onAlpha) { $0["fleet_linked"] == 0 }["fleet_linked"] == 0)
        #expect(try await onAlpha.stats()["nats_connected"] == nil, "no counters of a fleet that is gone")

        let again = try ChildProcess(
            Binaries.notifydFleet,
            ["--socket", alpha.socketPath, "--config", alpha.configurationPath, "--nats", nats.url, "--host-name", "alpha"]
        )
        try await again.standardError.wait("the fleet service to link and join NATS again") {
            $0.contains("following the daemon") && $0.contains("read the latest messages of other hosts")
        }
        let onBeta = try await beta.client()
        let remote = try await onBeta.subscribe(to: [TopicPattern("load.>")])
        #expect(try await alpha.notify(["send", "load.after", "across again"]).status == 0)
        let across = try await FederationTests.collect(remote, until: "load.after")
        #expect(across.map { "\($0.text ?? "") \($0.host ?? "-")" } == ["across again alpha"])

        for client in [onAlpha, publisher, onBeta] { await client.close() }
        again.signal(SIGTERM)
        #expect(try await again.exitStatus() == 0)
        alpha.child.signal(SIGTERM)
        #expect(try await alpha.child.exitStatus() == 0)
        try await beta.stop()
    }

    @Test("a fleet service of another user than the daemon's fleet-user is refused with a sentence saying what to set; local traffic goes on")
    func wrongUser() async throws {
        let nats = try await NATSServerProcess.start()
        defer { nats.stop() }
        let alpha = try await TestDaemon.start(arguments: ["--host-name", "alpha", "--nats", nats.url, "--fleet-user", "4242"])
        try await alpha.fleetLog.wait("the refusal") {
            $0.contains("the daemon refuses this service") && $0.contains("this daemon's fleet user is uid 4242")
                && $0.contains("set fleet-user")
        }
        let client = try await alpha.client()
        let stats = try await client.stats()
        #expect(stats["fleet_linked"] == 0 && stats["nats_connected"] == nil, "\(stats)")
        #expect(try await alpha.notify(["send", "local.x", "fine"]).status == 0)
        #expect(try await alpha.notify(["latest", "local.x"]).output == "fine\n")
        await client.close()
        try await alpha.stop()
    }

    @Test("--state-dir missing is made (0700) at start; one that cannot be made is exit 78 with a sentence, not a failure a minute in")
    func stateDirectory() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("fleet-state-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let common = ["--socket", root + "/no-daemon.sock", "--config", "/dev/null", "--nats", "nats://127.0.0.1:1", "--host-name", "alpha"]

        let fresh = root + "/positions"
        let fleet = try ChildProcess(Binaries.notifydFleet, common + ["--state-dir", fresh])
        try await fleet.standardError.wait("the fleet service to start") { $0.contains("notifyd-fleet started") }
        var status = stat()
        #expect(stat(fresh, &status) == 0 && status.st_mode & S_IFMT == S_IFDIR, "made at start")
        #expect(status.st_mode & 0o777 == 0o700)
        fleet.signal(SIGTERM)
        #expect(try await fleet.exitStatus() == 0)

        let unreachable = try ChildProcess(Binaries.notifydFleet, common + ["--state-dir", root + "/missing/parent"])
        #expect(try await unreachable.exitStatus() == 78)
        #expect(unreachable.standardError.text.contains("--state-dir \(root)/missing/parent cannot be made: No such file or directory"), "\(unreachable.standardError.text)")
    }
}

/// The stream of latest messages gets a topic's newest once per flush window (issue 47, item 4).
@Suite("The fleet's latest messages, coalesced (real notifyd, notifyd-fleet and nats-server)", .timeLimit(.minutes(5)))
struct LatestCoalescingTests {
    @Test("1,000 retained messages of one topic in a burst: every one goes live, the stream of latest messages gets a few writes, the newest last; a host started later holds the newest")
    func burst() async throws {
        let nats = try await NATSServerProcess.start()
        defer { nats.stop() }
        let watcher = try await NATSConnection.connect(host: "127.0.0.1", port: nats.port, name: "watcher")
        let live = try await watcher.subscribe(to: "notifyd.burst.>")
        let latest = try await watcher.subscribe(to: "notifyd-latest.burst.>")
        try await watcher.flush()
        let alpha = try await FederationTests.startHost("alpha", servers: [nats])
        let onAlpha = try await alpha.client()
        try await onAlpha.publish((1...1_000).map { ByteBuffer(string: "\($0)") }, to: Topic("burst.status"))
        _ = try await onAlpha.publishAcknowledged("end", to: Topic("burst.end"), retain: false)

        let liveCount = try await withDeadline(.seconds(30), waitingFor: "every message on the live subject") {
            var count = 0
            for try await message in live {
                if message.subject == "notifyd.burst.end" { return count }
                count += 1
            }
            return count
        }
        #expect(liveCount == 1_000, "the live subject gets every message")
        let stats = try await FederationTests.stats(of: onAlpha) { $0["nats_outbox_messages"] == 0 && $0["nats_exported"] == 1_001 }
        let coalesced = try #require(stats["nats_latest_coalesced"])
        // What reached the stream of latest messages, read until its newest.
        let writes = try await withDeadline(.seconds(30), waitingFor: "the newest on the stream of latest messages") {
            var payloads: [String] = []
            for try await message in latest {
                payloads.append(String(buffer: message.payload))
                if payloads.last == "1000" { return payloads }
            }
            return payloads
        }
        #expect(writes.count + Int(coalesced) == 1_000, "each retained message is written there or replaced by a newer one: \(writes.count) written, \(coalesced) coalesced")
        #expect(writes.count <= 500, "coalesced within a window: \(writes.count) writes")
        #expect(writes.last == "1000")

        let beta = try await FederationTests.startHost("beta", servers: [nats])
        #expect(try await beta.notify(["latest", "burst.status"]).output == "1000\n", "a host started later holds the newest")
        await onAlpha.close()
        await watcher.close()
        try await alpha.stop()
        try await beta.stop()
    }
}
