import ArgumentParser
import Foundation
import NIOCore
import NotifyBus
import Synchronization

/// What `sync = always` costs against the default `sync = never`, for acknowledged retained publishes.
struct SyncCost: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync-cost",
        abstract: "The cost of sync=always (an fsync before each acknowledgement leaves) against sync=never.",
        discussion: """
            For each policy, on a daemon of its own whose state directory is in --directory (the disk measured): \
            --messages acknowledged retained publishes one at a time (each its own batch, so each its own fsync \
            under sync=always), then the same number pipelined (many per batch), then from --publishers connections \
            at once, each one at a time as services publish (at least 200 each), while a reader asks for a buffered \
            message over and over: the acknowledged rate, and the reader's p99 against its p99 alone (under \
            sync=always the fsync runs on a thread of its own, so a reader waits for no disk). Prints the medians, \
            per policy, over --runs runs.
            """
    )

    @Option(help: "Publishes per measurement.") var messages = 2_000
    @Option(help: "Runs per policy (median reported).") var runs = 3
    @Option(help: "Where the daemons keep their state: the file system whose fsync is measured.") var directory = "/var/tmp"
    @Option(help: "Connections publishing at once in the third measurement.") var publishers = 64

    func run() throws {
        print("sync-cost: \(messages) acknowledged retained 16 B publishes, state in \(directory), \(runs) runs per policy")
        var results: [String: (oneAtATime: [Double], pipelined: [Double])] = [:]
        var concurrent: [String: (rate: [Double], readerP99: [Double], readerAloneP99: [Double])] = [:]
        for round in 0..<runs {
            for policy in round % 2 == 0 ? ["never", "always"] : ["always", "never"] {
                var template = Array("\(directory)/notifyd-sync-XXXXXX".utf8CString)
                guard let made = mkdtemp(&template) else { throw LoadError("mkdtemp in \(directory) failed") }
                let stateDirectory = String(cString: made)
                defer { try? FileManager.default.removeItem(atPath: stateDirectory) }
                let daemon = try BenchmarkDaemon(arguments: ["--sync", policy, "--state-dir", stateDirectory])
                defer { daemon.stop() }

                let connection = try NotifyConnection(to: daemon.socketPath)
                let payload = ByteBuffer(string: String(repeating: "s", count: 16))
                let start = ContinuousClock.now
                for index in 0..<messages {
                    try connection.publishAcknowledged(payload, to: Topic("sync.t\(index % 100)"))
                }
                let each = seconds(ContinuousClock.now - start) / Double(messages) * 1e6

                let publisher = try RawConnection(path: daemon.socketPath)
                var frames: [UInt8] = []
                for index in 0..<messages { frames += Array("#\(index) PUB sync.p\(index % 100) 16 ack\nssssssssssssssss\n".utf8) }
                let pipelinedStart = ContinuousClock.now
                let allFrames = frames
                let sender = Thread { try? publisher.send(allFrames) }
                sender.start()
                guard publisher.read(untilLine: "#\(messages - 1) OK \(messages / 100)") else { throw LoadError("the publisher's connection ended") }
                let pipelined = Double(messages) / seconds(ContinuousClock.now - pipelinedStart)
                print("  run \(round + 1) sync=\(policy): \(String(format: "%.1f", each)) µs per acknowledged publish one at a time (\(rate(1e6 / each)) msg/s), \(rate(pipelined)) msg/s pipelined")
                results[policy, default: ([], [])].oneAtATime.append(each)
                results[policy, default: ([], [])].pipelined.append(pipelined)

                let many = try manyPublishers(socketPath: daemon.socketPath)
                print("  run \(round + 1) sync=\(policy): \(publishers) publishers \(rate(many.rate)) acknowledged msg/s; a reader's p99 \(String(format: "%.0f", many.readerP99)) µs meanwhile, \(String(format: "%.0f", many.readerAloneP99)) µs alone")
                concurrent[policy, default: ([], [], [])].rate.append(many.rate)
                concurrent[policy, default: ([], [], [])].readerP99.append(many.readerP99)
                concurrent[policy, default: ([], [], [])].readerAloneP99.append(many.readerAloneP99)
            }
        }
        for policy in ["never", "always"] {
            let result = results[policy]!
            print("sync=\(policy): median \(String(format: "%.1f", median(result.oneAtATime))) µs per acknowledged publish one at a time (\(rate(1e6 / median(result.oneAtATime))) msg/s), \(rate(median(result.pipelined))) msg/s pipelined")
        }
        for policy in ["never", "always"] {
            let result = concurrent[policy]!
            print("sync=\(policy): median \(rate(median(result.rate))) acknowledged msg/s from \(publishers) publishers; a reader's p99 \(String(format: "%.0f", median(result.readerP99))) µs meanwhile, \(String(format: "%.0f", median(result.readerAloneP99))) µs alone")
        }
        let ratio = median(results["always"]!.oneAtATime) / median(results["never"]!.oneAtATime)
        print("sync=always costs \(String(format: "%.1f", ratio))× the time of sync=never per acknowledged publish one at a time")
    }

    /// `messages` acknowledged publishes from `publishers` connections at once, each one at a time, while a reader
    /// asks for a buffered message over and over; the reader's round trips measured alone first.
    private func manyPublishers(socketPath: String) throws -> (rate: Double, readerP99: Double, readerAloneP99: Double) {
        let reader = try NotifyConnection(to: socketPath)
        _ = try reader.publishAcknowledged(ByteBuffer(string: "r"), to: Topic("sync.reader"))
        func readerRoundTrips(until done: () -> Bool, atLeast: Int) throws -> [Double] {
            var durations: [Double] = []
            while durations.count < atLeast || !done() {
                let start = ContinuousClock.now
                _ = try reader.latest(Topic("sync.reader"))
                durations.append(seconds(ContinuousClock.now - start) * 1e6)
            }
            return durations
        }
        let alone = try readerRoundTrips(until: { true }, atLeast: 2_000)
        let each = max(200, messages / publishers)
        let finished = Atomic<Int>(0)
        let failed = Atomic<Bool>(false)
        let payload = ByteBuffer(string: String(repeating: "s", count: 16))
        // Each publisher connects on its own thread, then all start together.
        let ready = DispatchSemaphore(value: 0)
        let go = DispatchSemaphore(value: 0)
        for index in 0..<publishers {
            let sender = Thread {
                do {
                    let connection = try NotifyConnection(to: socketPath)
                    ready.signal()
                    go.wait()
                    for message in 0..<each { _ = try connection.publishAcknowledged(payload, to: Topic("sync.c\(index).t\(message % 10)")) }
                } catch {
                    failed.store(true, ordering: .relaxed)
                    ready.signal()
                }
                finished.add(1, ordering: .releasing)
            }
            sender.start()
        }
        for _ in 0..<publishers { ready.wait() }
        let start = ContinuousClock.now
        for _ in 0..<publishers { go.signal() }
        let meanwhile = try readerRoundTrips(until: { finished.load(ordering: .acquiring) == publishers }, atLeast: 1)
        let elapsed = seconds(ContinuousClock.now - start)
        guard !failed.load(ordering: .relaxed) else { throw LoadError("a publisher's connection failed") }
        return (Double(each * publishers) / elapsed, percentile(meanwhile, 0.99), percentile(alone, 0.99))
    }

    private func percentile(_ values: [Double], _ fraction: Double) -> Double {
        let sorted = values.sorted()
        return sorted[min(sorted.count - 1, Int(Double(sorted.count) * fraction))]
    }
}
