import Foundation
import NATSTestSupport
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
        let alpha = try await FederationTests.startHost("alpha", servers: [nats])
        let beta = try await FederationTests.startHost("beta", servers: [nats])
        let onAlpha = try await alpha.client()
        let local = try await onAlpha.subscribe(to: [TopicPattern("load.>")])
        let publisher = try await alpha.client()
        let count = 20_000
        // Read as they come, so that the subscriber itself never falls behind.
        let collecting = Task { try await FederationTests.collect(local, until: "load.end") }
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
        let received = try await collecting.value
        let numbers = received.filter { $0.topic.name == "load.m" }.compactMap { $0.text.flatMap(Int.init) }
        #expect(numbers == Array(1...count), "every local publish, in order, once")
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
}
