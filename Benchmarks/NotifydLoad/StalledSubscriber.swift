import ArgumentParser
import Foundation
import NotifyBus

/// Publish throughput with and without a subscriber that never reads, on one daemon, in rotation, several runs.
struct StalledSubscriber: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stalled-subscriber",
        abstract: "Publish throughput with one stalled subscriber present, against the same without it.",
        discussion: """
            One publisher pipelines --messages publishes (the last one acknowledged) to one topic that a reading \
            subscriber receives. Each round has three runs: that subscriber alone; with a second subscriber that \
            reads too; with a second one that never reads. Published msg/s is messages divided by the time from the \
            first byte sent to the acknowledgement of the last; daemon CPU is the daemon's user and system time over \
            the run, per message (in steps of 10 ms). Prints each run, the medians, and two ratios: stalled against \
            alone (the target), and stalled against a second reader (what stalling costs beyond one more \
            subscriber). On a busy machine a reading subscriber may fall behind: the daemon outruns it and drops \
            messages for it too, which the run says.
            """
    )

    @Option(help: "Messages per run.") var messages = 200_000
    @Option(help: "Payload bytes per message.") var payload = 16
    @Option(help: "Runs of each kind (median reported).") var runs = 5

    struct Run {
        var published: Double
        var delivered: Double
        /// Dropped for the stalled subscriber.
        var dropped: UInt64
        /// Dropped for the reading subscribers: they fell behind, as on a busy machine they may.
        var readerDropped: Int
        /// The daemon's CPU time per message, in microseconds: what a run cost, apart from how busy the machine was.
        var cpuPerMessage: Double
    }

    /// Who listens besides the reading subscriber.
    enum Kind: CaseIterable {
        /// Nobody.
        case alone
        /// A second subscriber that reads too: what one more subscriber costs, whatever it does.
        case secondReader
        /// A second subscriber that never reads.
        case stalled

        var label: String {
            switch self {
            case .alone: "one subscriber              "
            case .secondReader: "and a second, reading one   "
            case .stalled: "and a second, stalled one   "
            }
        }
    }

    func run() throws {
        let daemon = try BenchmarkDaemon()
        defer { daemon.stop() }
        print("stalled-subscriber: \(messages) messages of \(payload) B per run, \(runs) runs each, notifyd pid \(daemon.pid)")
        var results: [Kind: [Run]] = [:]
        for round in 0..<runs {
            // Rotate which goes first, so a drift of the machine does not favour one.
            let kinds = Kind.allCases
            for index in 0..<kinds.count {
                let kind = kinds[(index + round) % kinds.count]
                // Names of the same length, and short: the runs must differ in their subscribers only, and a name
                // over 15 bytes costs the parser an allocation per message (past Swift's small-string size).
                let result = try measure(daemon: daemon, topic: "bench.\(round).\(index)", kind: kind)
                print(
                    "  run \(round + 1), \(kind.label): "
                        + "published \(rate(result.published)) msg/s, delivered \(rate(result.delivered)) msg/s, "
                        + "daemon CPU \(String(format: "%.2f", result.cpuPerMessage)) µs/msg"
                        + (kind == .stalled ? ", dropped for the stalled one: \(result.dropped)" : "")
                        + (result.readerDropped > 0 ? " (and for a reading one, which fell behind: \(result.readerDropped))" : "")
                )
                results[kind, default: []].append(result)
            }
        }
        func published(_ kind: Kind) -> Double { median(results[kind, default: []].map(\.published)) }
        func cpu(_ kind: Kind) -> String { String(format: "%.2f", median(results[kind, default: []].map(\.cpuPerMessage))) }
        print(
            "median published msg/s: one subscriber \(rate(published(.alone))), with a second reading one "
                + "\(rate(published(.secondReader))), with a second stalled one \(rate(published(.stalled)))"
        )
        print("median daemon CPU µs/msg: \(cpu(.alone)), \(cpu(.secondReader)), \(cpu(.stalled))")
        print(
            "ratio with a stalled subscriber / without it: \(String(format: "%.3f", published(.stalled) / published(.alone))) "
                + "(target: at least 0.90)"
        )
        print(
            "ratio with a stalled second subscriber / with a reading one: "
                + "\(String(format: "%.3f", published(.stalled) / published(.secondReader))) (what stalling itself costs)"
        )
    }

    private func measure(daemon: BenchmarkDaemon, topic: String, kind: Kind) throws -> Run {
        let droppedBefore = try NotifyConnection(to: daemon.socketPath).stats()["dropped"] ?? 0
        let reader = try RawConnection(path: daemon.socketPath)
        reader.setReceiveTimeout(seconds: 10)
        try reader.send("SUB \(topic)\n#0 PING\n")
        guard reader.read(untilLine: "#0 PONG") else { throw LoadError("the subscriber's connection ended") }
        var second: RawConnection?
        if kind != .alone {
            let connection = try RawConnection(path: daemon.socketPath)
            try connection.send("SUB \(topic)\n#0 PING\n")
            guard connection.read(untilLine: "#0 PONG") else { throw LoadError("the second subscriber's connection ended") }
            second = connection
        }
        defer { second?.shutdown() }

        let body = String(repeating: "x", count: payload)
        // The last message is told apart by its payload: drop-oldest never drops the newest, so it always arrives.
        let lastBody = String(repeating: "z", count: payload)
        let frame = Array("PUB \(topic) \(payload)\n\(body)\n".utf8)
        var frames: [UInt8] = []
        frames.reserveCapacity(frame.count * messages + 16)
        for _ in 1..<messages { frames += frame }
        frames += Array("#1 PUB \(topic) \(payload) ack\n\(lastBody)\n".utf8)

        let delivered = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var deliveredAt = ContinuousClock.now
        nonisolated(unsafe) var reading = (received: 0, sawLast: false)
        Thread {
            reading = Self.receive(on: reader, untilPayload: lastBody)
            deliveredAt = ContinuousClock.now
            delivered.signal()
        }.start()
        let secondDone = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var secondReading = (received: messages, sawLast: true)
        if kind == .secondReader, let second {
            second.setReceiveTimeout(seconds: 10)
            Thread {
                secondReading = Self.receive(on: second, untilPayload: lastBody)
                secondDone.signal()
            }.start()
        } else {
            secondDone.signal()
        }

        let publisher = try RawConnection(path: daemon.socketPath)
        let cpuBefore = daemon.cpuSeconds
        let start = ContinuousClock.now
        let allFrames = frames
        let sender = Thread { try? publisher.send(allFrames) }
        sender.start()
        guard publisher.read(untilLine: "#1 OK \(messages)") else { throw LoadError("the publisher's connection ended") }
        let acknowledged = ContinuousClock.now
        delivered.wait()
        secondDone.wait()
        let cpu = daemon.cpuSeconds - cpuBefore
        guard reading.sawLast, secondReading.sawLast else {
            throw LoadError("a reading subscriber's connection ended, or it waited 10 s for the last message")
        }

        let readersDropped = 2 * messages - reading.received - secondReading.received
        let dropped = (try NotifyConnection(to: daemon.socketPath).stats()["dropped"] ?? 0) - droppedBefore
        return Run(
            published: Double(messages) / seconds(acknowledged - start),
            delivered: Double(messages) / seconds(deliveredAt - start),
            dropped: dropped - UInt64(readersDropped),
            readerDropped: readersDropped,
            cpuPerMessage: cpu * 1e6 / Double(messages)
        )
    }

    /// Reads deliveries until the one with `lastPayload`; returns how many arrived (the rest were dropped, as a
    /// subscriber that falls behind is told by DROP notices) and whether the last one did.
    private static func receive(on connection: RawConnection, untilPayload lastPayload: String) -> (received: Int, sawLast: Bool) {
        // A delivery is two lines (the payload has no line break); a DROP notice one, starting with D.
        var lines = 0
        var notices = 0
        var previous: UInt8 = 0x0A
        let last = Array(("\n" + lastPayload + "\n").utf8)
        var tail: [UInt8] = []
        let sawLast = connection.read { chunk in
            for byte in chunk {
                if byte == 0x0A { lines += 1 } else if byte == UInt8(ascii: "D") && previous == 0x0A { notices += 1 }
                previous = byte
            }
            tail = Array((tail + chunk.suffix(last.count)).suffix(last.count))
            return tail == last
        }
        return ((lines - notices) / 2, sawLast)
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
