import ArgumentParser
import Foundation
import NIOCore
import NIOPosix
import NotifyBus
import Synchronization

/// Many clients publishing and subscribing for a while, with some coming and going, while the daemon's RSS is
/// sampled: after warm-up it must stay flat.
struct Soak: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Many clients publish and subscribe for a bounded time; checks that the daemon's RSS stays flat.",
        discussion: """
            Each client subscribes to one of 100 patterns (soak.N.>) and publishes --rate messages per second to \
            one of --topics retained topics; each second --churn percent of the clients disconnect and connect \
            again. The daemon's RSS is sampled every second. Warm-up is the first quarter of the time; the exit \
            status is 1 when the largest RSS after warm-up is more than --tolerance percent above the RSS at its \
            end, or when a subscriber lost a message (the daemon's dropped counter is not 0).
            """
    )

    @Option(help: "Clients, each publishing and subscribing.") var clients = 1_000
    @Option(help: "How long to run, in seconds.") var seconds = 60
    @Option(help: "Messages per second per client.") var rate = 10
    @Option(help: "Distinct topics published to (all retained).") var topics = 5_000
    @Option(help: "Percent of the clients that reconnect each second.") var churn = 1
    @Option(help: "Allowed RSS growth after warm-up, in percent.") var tolerance = 10.0

    func run() async throws {
        let daemon = try BenchmarkDaemon()
        defer { daemon.stop() }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let state = SoakState()
        let clientCount = clients
        let churnPercent = churn
        let allowedGrowth = tolerance
        let topicCount = topics
        let interval = Duration.milliseconds(max(1, 1000 / max(1, rate)))
        let end = ContinuousClock.now + .seconds(seconds)
        print("soak: \(clients) clients for \(seconds) s, \(rate) msg/s each to \(topics) topics, \(churn)% reconnecting each second; notifyd pid \(daemon.pid)")

        // One task per client slot: connect, subscribe, publish at the rate; reconnect when told to.
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            for slot in 0..<clientCount {
                tasks.addTask {
                    var counter = 0
                    while ContinuousClock.now < end {
                        let client = try await NotifyClient.connect(to: daemon.socketPath, group: group)
                        let subscription = try await client.subscribe(to: [TopicPattern("soak.\(slot % 100).>")])
                        let reader = Task {
                            for try await _ in subscription.messages { state.received.add(1, ordering: .relaxed) }
                        }
                        while ContinuousClock.now < end, !state.reconnect.withLock({ $0.remove(slot) != nil }) {
                            counter += 1
                            let topic = try Topic("soak.\((slot + counter) % 100).t\((slot * 31 + counter) % max(1, topicCount / 100))")
                            try await client.publish("\(slot) \(counter)", to: topic)
                            try await Task.sleep(for: interval)  // pacing the load, not synchronisation
                        }
                        try await client.flush()
                        await client.close()
                        _ = try? await reader.value
                    }
                }
            }
            tasks.addTask {
                var samples: [(second: Int, kib: Int)] = []
                var second = 0
                let started = ContinuousClock.now
                var lastReceived = 0
                while ContinuousClock.now < end {
                    try await Task.sleep(until: started + .seconds(second + 1))
                    second += 1
                    let picked = (0..<max(1, clientCount * churnPercent / 100)).map { _ in Int.random(in: 0..<clientCount) }
                    state.reconnect.withLock { $0.formUnion(picked) }
                    let kib = daemon.residentKiB
                    let total = state.received.load(ordering: .relaxed)
                    samples.append((second, kib))
                    print("  \(second) s: RSS \(String(format: "%.1f", Double(kib) / 1024)) MiB, \(total - lastReceived) deliveries/s, daemon CPU \(String(format: "%.1f", daemon.cpuSeconds)) s")
                    lastReceived = total
                }
                try Self.verdict(samples, tolerance: allowedGrowth, daemon: daemon)
            }
            try await tasks.waitForAll()
        }
        try await group.shutdownGracefully()
    }

    /// What the clients' tasks share: deliveries counted, and which slots are to reconnect.
    final class SoakState: Sendable {
        let received = Atomic<Int>(0)
        let reconnect = Mutex<Set<Int>>([])
    }

    static func verdict(_ samples: [(second: Int, kib: Int)], tolerance: Double, daemon: BenchmarkDaemon) throws {
        let warmUp = max(1, samples.count / 4)
        guard samples.count > warmUp else { throw LoadError("too short to tell: run for at least 8 seconds") }
        let afterWarmUp = samples[warmUp - 1].kib
        let peak = samples[warmUp...].map(\.kib).max() ?? afterWarmUp
        let last = samples.last!.kib
        let growth = Double(peak - afterWarmUp) / Double(afterWarmUp) * 100
        let stats = try NotifyConnection(to: daemon.socketPath).stats()
        print(
            "RSS after warm-up (\(samples[warmUp - 1].second) s) \(afterWarmUp) KiB, peak after it \(peak) KiB (\(String(format: "%+.1f", growth))%), "
                + "at the end \(last) KiB; messages in \(stats["messages_in"] ?? 0), out \(stats["messages_out"] ?? 0), dropped \(stats["dropped"] ?? 0)"
        )
        if growth > tolerance || (stats["dropped"] ?? 0) > 0 {
            print("NOT FLAT: RSS grew more than \(tolerance)% after warm-up, or messages were dropped")
            throw ExitCode(1)
        }
        print("flat: RSS stayed within \(tolerance)% of its size after warm-up, and nothing was dropped")
    }
}
