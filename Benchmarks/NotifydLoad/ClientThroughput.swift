import ArgumentParser
import Foundation
import NIOCore
import NotifyBus
import NotifyCenter

/// A count shared with a publishing task.
private final class ManagedCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    var value: Int { lock.withLock { count } }
    func increment() { lock.withLock { count += 1 } }
}

/// Tasks waiting to be resumed, and whether the thread resuming them should stop.
private final class WaitingTasks: @unchecked Sendable {
    private let lock = NSLock()
    private var waiting: [CheckedContinuation<Void, Never>] = []
    private var finished = false
    var isFinished: Bool { lock.withLock { finished } }
    func add(_ task: CheckedContinuation<Void, Never>) { lock.withLock { waiting.append(task) } }
    func finish() { lock.withLock { finished = true } }
    func resumeAll() {
        let batch = lock.withLock {
            defer { waiting.removeAll(keepingCapacity: true) }
            return waiting
        }
        for task in batch { task.resume() }
    }
}

/// A status notification of the size the typed case sends.
private struct ThroughputStatus: NotifyMessage, Codable {
    static let topic = Topic.literal("client.typed")
    var host: String
    var number: Int
}

/// What a Swift service gets from the client library, through the API the README shows, against a release daemon
/// with its defaults: the figures issue 36 sets targets for.
struct ClientThroughput: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "client-throughput",
        abstract: "The client library's rates: publish, publishAcknowledged (1 and 64 tasks), iterating a subscription, NotifyCenter.",
        discussion: """
            One release notifyd with its defaults; each case on fresh connections, --runs times, medians printed. \
            publish: one task, one call per 16 B message, then flush(); publish-main, ack-1-main, ack-64-main, iterate-main, center-main: \
            the same from the main actor (top-level code, a @MainActor type; ack-rtt, resume-floor and memory have none: \
            a blocking round trip, the runtime's ceiling and a process's memory are the same from any actor). ack-1: one task, publishAcknowledged in a \
            loop. ack-64: 64 tasks at once. ack-rtt: ack-1's floor, the same over a blocking NotifyConnection (no \
            event loop, no task). resume-floor: ack-64's ceiling on this machine with no socket and no daemon, \
            64 tasks each awaiting a continuation that a spinning thread resumes in batches. iterate: a publisher using the batch form publish([ByteBuffer]) in \
            1,000s, and one consumer iterating `for try await event in subscription`, counting messages and what \
            was dropped until an end marker. center: NotifyCenter.send of a 2-field Codable, and \
            messages(of:) on another connection.
            """
    )

    @Option(help: "Messages per run of publish and iterate.") var messages = 1_000_000
    @Option(help: "Acknowledged publishes per run of ack-1 and ack-rtt (four times as many for ack-64).") var acknowledged = 50_000
    @Option(help: "Typed messages per run of center.") var typed = 200_000
    @Option(help: "Runs of each case (medians reported).") var runs = 3
    @Option(help: "Cases to run, comma-separated: publish, publish-main, ack-1, ack-1-main, ack-64, ack-64-main, ack-rtt, resume-floor, iterate, iterate-main, center, center-main, memory.")
    var cases = "publish,publish-main,ack-1,ack-1-main,ack-64,ack-64-main,ack-rtt,iterate,iterate-main,center,center-main"

    func run() async throws {
        let daemon = try BenchmarkDaemon()
        defer { daemon.stop() }
        for name in cases.split(separator: ",").map(String.init) {
            if name == "memory" {
                try await memory(daemon)
                continue
            }
            var rates: [Double] = []
            var notes: [String] = []
            for _ in 0..<runs {
                let (rate, note) = try await measure(name, on: daemon)
                rates.append(rate)
                if let note { notes.append(note) }
            }
            let each = rates.map { Self.rate($0) }.joined(separator: ", ")
            print("\(name.padding(toLength: 12, withPad: " ", startingAt: 0)) median \(Self.rate(median(rates))) msg/s (runs: \(each))"
                + (notes.isEmpty ? "" : "; " + notes.joined(separator: ", ")))
        }
    }

    private func measure(_ name: String, on daemon: BenchmarkDaemon) async throws -> (Double, String?) {
        switch name {
        case "publish": return (try await publish(daemon), nil)
        case "publish-main": return (try await publish(daemon, isolation: MainActor.shared), nil)
        case "ack-1": return (try await acknowledged(daemon, tasks: 1, each: acknowledged), nil)
        case "ack-64": return (try await acknowledged(daemon, tasks: 64, each: max(1, acknowledged * 4 / 64)), nil)
        case "ack-1-main": return (try await acknowledgedOnMainActor(daemon, tasks: 1, each: acknowledged), nil)
        case "ack-64-main": return (try await acknowledgedOnMainActor(daemon, tasks: 64, each: max(1, acknowledged * 4 / 64)), nil)
        case "ack-rtt": return (try roundTrips(daemon), nil)
        case "resume-floor": return (await resumeFloor(tasks: 64, each: max(1, acknowledged * 4 / 64)), nil)
        case "iterate": return try await iterate(daemon)
        case "iterate-main": return try await iterate(daemon, isolation: MainActor.shared)
        case "center": return (try await center(daemon), nil)
        case "center-main": return (try await center(daemon, isolation: MainActor.shared), nil)
        default: throw LoadError("no case \(name)")
        }
    }

    /// Runs on `isolation` (the caller's by default): publish-main runs it on the main actor, where top-level code and
    /// every `@MainActor` type (a view model) run, and where an async call that hopped to the global executor and
    /// back cost 30 times what it does off it.
    private func publish(_ daemon: BenchmarkDaemon, isolation: isolated (any Actor)? = #isolation) async throws -> Double {
        let client = try await NotifyClient.connect(to: daemon.socketPath)
        defer { Task { await client.close() } }
        let payload = ByteBuffer(string: "0123456789abcdef")
        let topic = try Topic("client.publish")
        let start = ContinuousClock.now
        for _ in 0..<messages { try await client.publish(payload, to: topic, retain: false) }
        try await client.flush()
        return Double(messages) / seconds(ContinuousClock.now - start)
    }

    /// The floor of ack-1: acknowledged publishes over a blocking `NotifyConnection`, one thread, no event loop or
    /// task between the caller and the socket: the daemon's round trip as this machine gives it now.
    private func roundTrips(_ daemon: BenchmarkDaemon) throws -> Double {
        let connection = try NotifyConnection(to: daemon.socketPath)
        let payload = ByteBuffer(string: "0123456789abcdef")
        let topic = try Topic("client.ack")
        let start = ContinuousClock.now
        for _ in 0..<acknowledged { try connection.publishAcknowledged(payload, to: topic, retain: false) }
        return Double(acknowledged) / seconds(ContinuousClock.now - start)
    }

    /// The ceiling of ack-64 that the Swift runtime sets here, before any socket or daemon: `tasks` tasks each
    /// suspend on a continuation and are resumed in batches by a thread that does nothing else, as the client's
    /// event loop resumes the callers whose replies one read brought.
    private func resumeFloor(tasks: Int, each: Int) async -> Double {
        let waiting = WaitingTasks()
        let resumer = Thread { while !waiting.isFinished { waiting.resumeAll() } }
        resumer.start()
        let start = ContinuousClock.now
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<tasks {
                group.addTask { for _ in 0..<each { await withCheckedContinuation { waiting.add($0) } } }
            }
        }
        let elapsed = seconds(ContinuousClock.now - start)
        waiting.finish()
        return Double(tasks * each) / elapsed
    }

    private func acknowledged(_ daemon: BenchmarkDaemon, tasks: Int, each: Int) async throws -> Double {
        let client = try await NotifyClient.connect(to: daemon.socketPath)
        defer { Task { await client.close() } }
        let payload = ByteBuffer(string: "0123456789abcdef")
        let topic = try Topic("client.ack")
        let start = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<tasks {
                group.addTask {
                    for _ in 0..<each { try await client.publishAcknowledged(payload, to: topic, retain: false) }
                }
            }
            try await group.waitForAll()
        }
        return Double(tasks * each) / seconds(ContinuousClock.now - start)
    }

    /// ack-1 and ack-64 with each task on the main actor, as a view model's would be.
    private func acknowledgedOnMainActor(_ daemon: BenchmarkDaemon, tasks: Int, each: Int) async throws -> Double {
        let client = try await NotifyClient.connect(to: daemon.socketPath)
        defer { Task { await client.close() } }
        let payload = ByteBuffer(string: "0123456789abcdef")
        let topic = try Topic("client.ack")
        let start = ContinuousClock.now
        let running = (0..<tasks).map { _ in
            Task { @MainActor in
                for _ in 0..<each { try await client.publishAcknowledged(payload, to: topic, retain: false) }
            }
        }
        for task in running { try await task.value }
        return Double(tasks * each) / seconds(ContinuousClock.now - start)
    }

    /// On `isolation`, the publisher and the consumer both (iterate-main: the main actor).
    private func iterate(_ daemon: BenchmarkDaemon, isolation: isolated (any Actor)? = #isolation) async throws -> (Double, String?) {
        let subscriber = try await NotifyClient.connect(to: daemon.socketPath)
        let publisher = try await NotifyClient.connect(to: daemon.socketPath)
        defer { Task { await subscriber.close(); await publisher.close() } }
        let subscription = try await subscriber.subscribe(to: [TopicPattern("client.iterate.>")])
        // Captures the isolation, so it runs there too.
        let receiving = Task {
            isolation?.preconditionIsolated("the consumer runs where the case says")
            var received = 0
            var dropped = 0
            for try await event in subscription {
                switch event {
                case .message(let delivery):
                    if delivery.topic.name == "client.iterate.end" { return (received, dropped) }
                    received += 1
                case .dropped(let notice):
                    dropped += Int(clamping: notice.count)
                }
            }
            throw LoadError("the subscription ended early")
        }
        let payloads = [ByteBuffer](repeating: ByteBuffer(string: "0123456789abcdef"), count: 1_000)
        let topic = try Topic("client.iterate.m")
        let start = ContinuousClock.now
        for _ in 0..<(messages / payloads.count) { try await publisher.publish(payloads, to: topic, retain: false) }
        try await publisher.publishAcknowledged("end", to: Topic("client.iterate.end"), retain: false)
        let (received, dropped) = try await receiving.value
        let elapsed = seconds(ContinuousClock.now - start)
        return (Double(received) / elapsed, "dropped \(dropped)")
    }

    /// On `isolation`, the poster and the consumer both (center-main: the main actor).
    private func center(_ daemon: BenchmarkDaemon, isolation: isolated (any Actor)? = #isolation) async throws -> Double {
        let subscriber = try await NotifyCenter.connect(to: daemon.socketPath)
        let publisher = try await NotifyCenter.connect(to: daemon.socketPath)
        defer { Task { await subscriber.close(); await publisher.close() } }
        let notifications = try await subscriber.messages(of: ThroughputStatus.self)
        let count = typed
        let receiving = Task {
            isolation?.preconditionIsolated("the consumer runs where the case says")
            var received = 0
            for try await event in notifications {
                guard case .notification(let notification) = event else { continue }
                if notification.value.number == count { return received + 1 }
                received += 1
            }
            throw LoadError("the notifications ended early")
        }
        let start = ContinuousClock.now
        for number in 1...count { try await publisher.send(ThroughputStatus(host: "db1.example.org", number: number), retain: false) }
        let received = try await receiving.value
        return Double(received) / seconds(ContinuousClock.now - start)
    }

    /// What this process holds (resident set, KiB) when its consumer stops iterating, and when the daemon stops
    /// reading its publishes: the client's bounds, not the publishers' volume, should decide it.
    private func memory(_ daemon: BenchmarkDaemon) async throws {
        let payload = ByteBuffer(repeating: UInt8(ascii: "x"), count: 1_000)
        let start = Self.residentKiB
        // A subscription nobody iterates, with the default limits (1,024 events or 1 MiB; twice that at most).
        let subscriber = try await NotifyClient.connect(to: daemon.socketPath)
        let subscription = try await subscriber.subscribe(to: [TopicPattern("memory.>")])
        let publisher = try await NotifyClient.connect(to: daemon.socketPath)
        for _ in 0..<100 {
            try await publisher.publish([ByteBuffer](repeating: payload, count: 1_000), to: Topic("memory.t"), retain: false)
        }
        try await publisher.flush()
        try await Task.sleep(for: .seconds(1))  // a benchmark's pause: let the client read what it will
        let stalled = Self.residentKiB
        print("memory   a subscription not iterated, 100 MB published at it: holds \(subscription.buffered.events) events,"
            + " \(subscription.buffered.bytes / 1024) KiB counted; process RSS +\(stalled - start) KiB")
        await subscriber.close()

        // A daemon that stops reading: publishing goes on until the client's bound (4 MiB by default) is full.
        kill(daemon.pid, SIGSTOP)
        let before = Self.residentKiB
        let sent = ManagedCounter()
        let publishing = Task {
            for _ in 0..<100_000 {
                try await publisher.publish(payload, to: Topic("memory.stopped"), retain: false)
                sent.increment()
            }
        }
        var last = -1
        while sent.value != last {
            last = sent.value
            try await Task.sleep(for: .milliseconds(500))
        }
        let held = Self.residentKiB
        print("memory   a daemon stopped (SIGSTOP) under a publisher of 1 KB messages: \(sent.value) publishes returned"
            + " of 100,000 before it waited; process RSS +\(held - before) KiB")
        kill(daemon.pid, SIGCONT)
        try await publishing.value
        try await publisher.flush()
        await publisher.close()
    }

    static var residentKiB: Int {
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") }
        return line.flatMap { $0.split(separator: " ").dropFirst().first.flatMap { Int($0) } } ?? 0
    }

    static func rate(_ perSecond: Double) -> String {
        perSecond >= 1e6 ? String(format: "%.2fM", perSecond / 1e6) : String(format: "%.0fk", perSecond / 1e3)
    }
}
