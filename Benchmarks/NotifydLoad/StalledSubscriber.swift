import ArgumentParser
import Foundation
import NotifyBus

/// Publish throughput with and without a subscriber that never reads, on one daemon, alternating, several runs.
struct StalledSubscriber: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stalled-subscriber",
        abstract: "Publish throughput with one stalled subscriber present, against the same without it.",
        discussion: """
            One publisher pipelines --messages publishes (the last one acknowledged) to one topic that a reading \
            subscriber receives; in every other run a second subscriber to the topic never reads. Published msg/s \
            is messages divided by the time from the first byte sent to the acknowledgement of the last. Prints \
            each run, the medians, and their ratio.
            """
    )

    @Option(help: "Messages per run.") var messages = 1_000_000
    @Option(help: "Payload bytes per message.") var payload = 16
    @Option(help: "Runs of each kind (median reported).") var runs = 5

    struct Run {
        var published: Double
        var delivered: Double
        var dropped: UInt64
    }

    func run() throws {
        let daemon = try DaemonProcess()
        defer { daemon.stop() }
        print("stalled-subscriber: \(messages) messages of \(payload) B per run, \(runs) runs each, notifyd pid \(daemon.pid)")
        var without: [Run] = []
        var with: [Run] = []
        for round in 0..<runs {
            // Alternate which goes first, so a drift of the machine does not favour one.
            for stalled in round % 2 == 0 ? [false, true] : [true, false] {
                let result = try measure(daemon: daemon, topic: "bench.r\(round).\(stalled ? "stalled" : "clean")", stalled: stalled)
                print(
                    "  run \(round + 1) \(stalled ? "with a stalled subscriber   " : "without a stalled subscriber"): "
                        + "published \(rate(result.published)) msg/s, delivered \(rate(result.delivered)) msg/s"
                        + (stalled ? ", dropped for the stalled one: \(result.dropped)" : "")
                )
                if stalled { with.append(result) } else { without.append(result) }
            }
        }
        let clean = median(without.map(\.published))
        let stalledRate = median(with.map(\.published))
        print("median published msg/s: without \(rate(clean)), with a stalled subscriber \(rate(stalledRate))")
        print("ratio with/without: \(String(format: "%.3f", stalledRate / clean)) (target: at least 0.90)")
    }

    private func measure(daemon: DaemonProcess, topic: String, stalled: Bool) throws -> Run {
        let droppedBefore = try NotifyConnection(to: daemon.socketPath).stats()["dropped"] ?? 0
        let reader = try RawConnection(path: daemon.socketPath)
        try reader.send("SUB \(topic)\n#0 PING\n")
        guard reader.read(untilLine: "#0 PONG") else { throw LoadError("the subscriber's connection ended") }
        var stalledConnection: RawConnection?
        if stalled {
            let connection = try RawConnection(path: daemon.socketPath)
            try connection.send("SUB \(topic)\n#0 PING\n")
            guard connection.read(untilLine: "#0 PONG") else { throw LoadError("the stalled subscriber's connection ended") }
            stalledConnection = connection
        }
        defer { stalledConnection?.shutdown() }

        let body = String(repeating: "x", count: payload)
        let frame = Array("PUB \(topic) \(payload)\n\(body)\n".utf8)
        var frames: [UInt8] = []
        frames.reserveCapacity(frame.count * messages + 16)
        for _ in 1..<messages { frames += frame }
        frames += Array("#1 PUB \(topic) \(payload) ack\n\(body)\n".utf8)

        // Each delivery is two lines (the payload has no line break).
        let expectedLines = 2 * messages
        let delivered = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var deliveredAt = ContinuousClock.now
        let readerThread = Thread {
            var lines = 0
            _ = reader.read { chunk in
                for byte in chunk where byte == 0x0A { lines += 1 }
                return lines >= expectedLines
            }
            deliveredAt = ContinuousClock.now
            delivered.signal()
        }
        readerThread.start()

        let publisher = try RawConnection(path: daemon.socketPath)
        let start = ContinuousClock.now
        let allFrames = frames
        let sender = Thread { try? publisher.send(allFrames) }
        sender.start()
        guard publisher.read(untilLine: "#1 OK \(messages)") else { throw LoadError("the publisher's connection ended") }
        let acknowledged = ContinuousClock.now
        delivered.wait()

        let dropped = (try NotifyConnection(to: daemon.socketPath).stats()["dropped"] ?? 0) - droppedBefore
        return Run(
            published: Double(messages) / seconds(acknowledged - start),
            delivered: Double(messages) / seconds(deliveredAt - start),
            dropped: dropped
        )
    }
}

func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
}

func rate(_ value: Double) -> String {
    if value >= 1e6 { return String(format: "%.2fM", value / 1e6) }
    if value >= 1e3 { return String(format: "%.1fk", value / 1e3) }
    return String(format: "%.0f", value)
}
