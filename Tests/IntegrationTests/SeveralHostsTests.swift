import Foundation
import NATSClient
import NATSTestSupport
import NIOConcurrencyHelpers
import NIOCore
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

    @Test(
        "chaos: a 3-server cluster, the log with 3 replicas; during 10,000 acknowledged publishes over 3 hosts, the server each host uses, then the log's leader, killed -9 and restarted: every host's subscriber gets every message once, each origin's in order",
        .enabled(if: TestNetwork.isAvailable, "network namespaces need root and ip (iproute2)")
    )
    func chaos() async throws {
        let network = try TestNetwork()
        var cluster = try await NATSServerProcess.startCluster(count: 3, address: network.gateway)
        defer { for server in cluster { server.stop() } }
        let names = ["alpha", "beta", "gamma"]
        let total = 10_000
        let options = ["--nats-stream-replicas", "3", "--history-messages", "20000", "--history-bytes", "16777216"]
        var daemons: [TestDaemon] = []
        for (index, name) in names.enumerated() {
            // Each host uses a server of its own first: killing it moves that host, and only it, to another.
            let order = (0..<3).map { cluster[(index + $0) % 3] }
            let namespace = try network.addHost(name)
            let daemon = try await TestDaemon.start(arguments: ["--host-name", name] + order.flatMap { ["--nats", $0.url] } + options, namespace: namespace)
            try await daemon.fleetLog.wait("\(name) to join NATS") { $0.contains("read the latest messages of other hosts") }
            daemons.append(daemon)
        }
        var clients: [NotifyClient] = []
        for daemon in daemons { clients.append(try await daemon.client()) }
        // Every host's subscriber, from before the first publish to the last message of all.
        var receivers: [Task<[String], any Error>] = []
        for client in clients {
            let subscription = try await client.subscribe(to: [TopicPattern("chaos.>")])
            receivers.append(
                Task {
                    try await withDeadline(.seconds(120), waitingFor: "all \(total) messages at a host") {
                        var received: [String] = []
                        for try await event in subscription {
                            guard case .message(let delivery) = event else { continue }
                            received.append(String(buffer: delivery.payload))
                            if received.count == total { return received }
                        }
                        throw TestFailure("the subscription ended after \(received.count)")
                    }
                }
            )
        }
        for client in clients { try await BackpressureTests.waitForSubscriptions(1, on: client) }

        let gateway = network.gateway
        /// The log's leader once the cluster has one and every replica is current again.
        func healthyLeader() async throws -> String {
            let ports = cluster.map(\.port)
            let last = NIOLockedValueBox("")
            do {
                return try await withDeadline(.seconds(90), waitingFor: "the log to have a leader and current replicas") { () -> String in
                    while true {
                        for port in ports {
                            guard let observer = try? await NATSConnection.connect(host: gateway, port: port, name: "observer") else { continue }
                            let info: String
                            do {
                                info = try await JetStreamAPI(observer).request("STREAM.INFO.notifyd_log", body: "", timeout: .seconds(2))
                            } catch {
                                info = "\(port): \(error)"
                            }
                            await observer.close()
                            last.withLockedValue { $0 = info }
                            if let leader = JSONScan.string("leader", in: info), !info.contains(#""current":false"#) { return leader }
                        }
                        try await Task.sleep(for: .milliseconds(200))
                    }
                }
            } catch {
                Issue.record("the log's last info: \(last.withLockedValue { $0 })")
                throw error
            }
        }
        /// Kills `server` with SIGKILL and starts it again on its port, store and routes; returns once the log is
        /// whole again (one failure at a time, as a cluster of three survives).
        // A killed server's object owns its store: kept until the end, or letting go of it would remove the store
        // under the restarted one.
        var killed: [NATSServerProcess] = []
        defer { withExtendedLifetime(killed) {} }
        func crashAndRestart(_ index: Int) async throws {
            let server = cluster[index]
            server.kill()
            killed.append(server)
            cluster[index] = try await NATSServerProcess.start(port: server.port, store: server.store, cluster: server.cluster, address: gateway)
            _ = try await healthyLeader()
        }
        let rounds = 10
        for round in 0..<rounds {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (index, client) in clients.enumerated() {
                    group.addTask {
                        let topic = try Topic("chaos.\(names[index])")
                        for number in stride(from: round * total / rounds + index + 1, through: (round + 1) * total / rounds, by: 3) {
                            _ = try await client.publishAcknowledged("\(names[index]) \(number)", to: topic, retain: false)
                        }
                    }
                }
                try await group.waitForAll()
            }
            switch round {
            case 2: try await crashAndRestart(0)  // alpha's
            case 4: try await crashAndRestart(1)  // beta's
            case 6: try await crashAndRestart(2)  // gamma's
            case 8:
                let leader = try await healthyLeader()
                try await crashAndRestart(try #require(cluster.indices.first { "notifyd-test-\($0)" == leader }))
            default: break
            }
        }
        for (index, receiver) in receivers.enumerated() {
            let received: [String]
            do {
                received = try await receiver.value
            } catch {
                Issue.record("\(names[index]): \(error)\ncounters: \(try await clients[index].stats())\nlog:\n\(daemons[index].log.suffix(4_000))")
                continue
            }
            #expect(Set(received).count == total, "\(names[index]): each of the \(total) once")
            for origin in names {
                let numbers = received.filter { $0.hasPrefix(origin + " ") }.compactMap { Int($0.split(separator: " ")[1]) }
                #expect(numbers == numbers.sorted(), "\(names[index]): \(origin)'s in order")
            }
        }
        for client in clients { await client.close() }
        for daemon in daemons { try await daemon.stop() }
    }
}
