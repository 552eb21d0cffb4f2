import Foundation
import NATSTestSupport
import NotifyBus
import Testing

/// Real hosts of the test's own (network namespaces, `TestNetwork`), each with its `notifyd`, on a real 3-server NATS
/// cluster: a host's link is cut as a cable would be, and what it missed comes when the link is back (issue 37).
@Suite("Several hosts in namespaces of their own (real network, nats-server and notifyd)", .timeLimit(.minutes(10)))
struct SeveralHostsTests {
    /// Waits until `name` on `client`'s daemon is at least `value`, for as long as a link coming back may take.
    static func waitForCounter(_ name: String, toReach value: UInt64, on client: NotifyClient) async throws {
        try await withDeadline(.seconds(90), waitingFor: "\(name) to reach \(value)") {
            while try await client.stats()[name] ?? 0 < value { try await Task.sleep(for: .milliseconds(50)) }
        }
    }

    @Test(
        "a host cut off while another publishes 1,000 acknowledged messages gets all of them, once, in order, when its link is back; a third host never lost them",
        .enabled(if: TestNetwork.isAvailable, "network namespaces need root and ip (iproute2)")
    )
    func partitionHealed() async throws {
        let network = try TestNetwork()
        let cluster = try await NATSServerProcess.startCluster(count: 3, address: network.gateway)
        defer { for server in cluster { server.stop() } }
        let servers = cluster.flatMap { ["--nats", $0.url] }
        let options = ["--nats-stream-replicas", "3", "--history-messages", "5000"]
        var daemons: [String: TestDaemon] = [:]
        for name in ["alpha", "beta", "gamma"] {
            let namespace = try network.addHost(name)
            let daemon = try await TestDaemon.start(arguments: ["--host-name", name] + servers + options, namespace: namespace)
            try await daemon.fleetLog.wait("\(name) to join NATS") { $0.contains("read the latest messages of other hosts") }
            daemons[name] = daemon
        }
        let alpha = daemons["alpha"]!, beta = daemons["beta"]!, gamma = daemons["gamma"]!
        let onAlpha = try await alpha.client()
        let onBeta = try await beta.client()
        let onGamma = try await gamma.client()
        #expect(try await alpha.notify(["send", "net.first", "before the cut"]).status == 0)
        try await Self.waitForCounter("nats_imported", toReach: 1, on: onBeta)
        try await Self.waitForCounter("nats_imported", toReach: 1, on: onGamma)

        try network.cut("beta")
        let topic = try Topic("net.m")
        for index in 1...1_000 {
            _ = try await onAlpha.publishAcknowledged("\(index)", to: topic, retain: false)
        }
        try await Self.waitForCounter("nats_exported", toReach: 1_001, on: onAlpha)
        do {
            try await Self.waitForCounter("nats_imported", toReach: 1_001, on: onGamma)
        } catch {
            Issue.record("gamma's log:\n\(gamma.log)\ngamma's counters: \(try await onGamma.stats())")
            throw error
        }
        #expect(try await onBeta.stats()["nats_imported"] == 1, "nothing reaches a host whose link is down")

        try network.restore("beta")
        do {
            try await Self.waitForCounter("nats_imported", toReach: 1_001, on: onBeta)
        } catch {
            Issue.record("beta's log:\n\(beta.log)\nbeta's counters: \(try await onBeta.stats())")
            throw error
        }
        let expected: [String] = (1...1_000).map { String($0) }
        for host in [beta, gamma] {
            // One more than there are: the subscriber waits for it in vain (exit 124), so nothing else is there.
            let resumed = try await host.notify(["subscribe", "net.m", "--since", "0", "--count", "1001", "--timeout", "1", "--format", "raw"])
            #expect(resumed.status == 124, "\(resumed.stderr)")
            let lines: [String] = resumed.output.split(separator: "\n").map { String($0) }
            #expect(lines == expected, "all 1,000, in order, once")
        }
        let stats = try await onBeta.stats()
        #expect(stats["nats_imported"] == 1_001 && stats["nats_catch_up_missed"] == 0, "\(stats)")
        for client in [onAlpha, onBeta, onGamma] { await client.close() }
        for daemon in [alpha, beta, gamma] { try await daemon.stop() }
    }
}
