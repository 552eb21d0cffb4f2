import ArgumentParser
import Foundation
import NIOCore
import NotifyBus
import NotifyCenter

/// A typed notification of the size a status message has.
private struct Sample: NotifyMessage, Codable {
    static let topic = Topic.literal("typed.sample")
    var host: String
    var number: Int
    var load: Double
}

/// What the typed layer (`NotifyCenter`: encoding, decoding, the center's streams) costs beside the raw client.
struct TypedCost: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "typed-cost",
        abstract: "Typed notifications (NotifyCenter, JSON) against raw NotifyClient publishes, one daemon, alternated runs.",
        discussion: """
            On one daemon: a subscriber and a publisher, each a connection of its own. Raw: the publisher sends \
            --messages publishes of the JSON of a Sample value, encoded once, with NotifyClient.publish (no \
            acknowledgement), and the subscriber counts NotifyClient deliveries. Typed: the publisher sends each \
            value with NotifyCenter.send (encoding it), and the subscriber takes NotifyCenter.notifications \
            (decoding each). Both without retaining. Prints, per run and as medians of --runs alternated runs, \
            the messages per second from the first publish until the subscriber has the last, and typed/raw.
            """
    )

    @Option(help: "Messages per run.") var messages = 100_000
    @Option(help: "Runs of each (alternated; medians reported).") var runs = 5

    func run() async throws {
        let daemon = try BenchmarkDaemon(arguments: ["--history-messages", "0"])
        defer { daemon.stop() }
        let sample = Sample(host: "db1.example.org", number: 1, load: 0.75)
        let payload = try Sample.codec.encode(sample)
        print("typed-cost: \(messages) messages of \(payload.readableBytes) B (\(String(buffer: payload))), \(runs) runs each")
        var raw: [Double] = []
        var typed: [Double] = []
        for round in 0..<runs {
            for kind in round % 2 == 0 ? ["raw", "typed"] : ["typed", "raw"] {
                let measured = kind == "raw" ? try await runRaw(daemon, payload) : try await runTyped(daemon)
                print("  run \(round + 1) \(kind): \(rate(measured)) msg/s")
                if kind == "raw" { raw.append(measured) } else { typed.append(measured) }
            }
        }
        // The codec alone, in this process: what the typed layer adds per message on each side.
        var codecRuns: [Double] = []
        for _ in 0..<runs {
            let start = ContinuousClock.now
            var sum = 0
            for number in 1...messages {
                let encoded = try Sample.codec.encode(Sample(host: "db1.example.org", number: number, load: 0.75))
                sum &+= try Sample.codec.decode(encoded).number
            }
            precondition(sum > 0)
            codecRuns.append(seconds(ContinuousClock.now - start) / Double(messages) * 1e6)
        }
        print("JSON encode + decode of one Sample, no socket: median \(String(format: "%.2f", median(codecRuns))) µs")
        let ratios = zip(typed, raw).map { $0 / $1 }
        print("raw: median \(rate(median(raw))) msg/s; typed: median \(rate(median(typed))) msg/s;"
            + " typed/raw: median \(String(format: "%.2f", median(ratios))) (pairs: \(ratios.map { String(format: "%.2f", $0) }.joined(separator: ", ")))")
    }

    private func runRaw(_ daemon: BenchmarkDaemon, _ payload: ByteBuffer) async throws -> Double {
        let subscriber = try await NotifyClient.connect(to: daemon.socketPath)
        let publisher = try await NotifyClient.connect(to: daemon.socketPath)
        let subscription = try await subscriber.subscribe(to: [TopicPattern(Sample.topic)])
        let count = messages
        let receiving = Task {
            var received = 0
            for try await _ in subscription.messages {
                received += 1
                if received == count { return }
            }
        }
        let start = ContinuousClock.now
        for _ in 0..<count { try await publisher.publish(payload, to: Sample.topic, retain: false) }
        try await publisher.flush()
        try await receiving.value
        let elapsed = ContinuousClock.now - start
        await subscriber.close()
        await publisher.close()
        return Double(count) / seconds(elapsed)
    }

    private func runTyped(_ daemon: BenchmarkDaemon) async throws -> Double {
        let subscriber = try await NotifyCenter.connect(to: daemon.socketPath)
        let publisher = try await NotifyCenter.connect(to: daemon.socketPath)
        let notifications = try await subscriber.messages(of: Sample.self)
        let count = messages
        let receiving = Task {
            var received = 0
            for try await event in notifications {
                guard case .notification(let notification) = event else { throw LoadError("not a notification: \(event)") }
                received += notification.value.number > 0 ? 1 : 0
                if received == count { return }
            }
        }
        let start = ContinuousClock.now
        for number in 1...count { try await publisher.send(Sample(host: "db1.example.org", number: number, load: 0.75), retain: false) }
        try await publisher.client.flush()
        try await receiving.value
        let elapsed = ContinuousClock.now - start
        await subscriber.close()
        await publisher.close()
        return Double(count) / seconds(elapsed)
    }
}
