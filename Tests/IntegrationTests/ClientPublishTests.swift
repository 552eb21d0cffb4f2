import Foundation
import NIOCore
import Synchronization
import Testing
import TestSupport

@testable import NotifyBus
@testable import NotifyProtocol

/// The library's publishing against a real notifyd (issue 36): fire-and-forget publishes gathered and written once
/// per turn of the connection's event loop, acknowledged ones from many tasks sharing that write path, and a bound
/// that holds a publisher back when the daemon stops reading.
@Suite("Publishing from the library (real notifyd)", .timeLimit(.minutes(10)))
struct ClientPublishTests {
    @Test("fire-and-forget publishes from one task arrive in call order, each once, before what the task asks next")
    func inOrder() async throws {
        let daemon = try await TestDaemon.start()
        let subscriber = try await daemon.client()
        let subscription = try await subscriber.subscribe(to: [TopicPattern("order.>")], buffer: SubscriptionBufferLimits(highEvents: 100_000, highBytes: 64 << 20))
        let publisher = try await daemon.client()
        try await BackpressureTests.waitForSubscriptions(1, on: publisher)
        let count = 20_000
        for number in 1...count { try await publisher.publish("\(number)", to: Topic("order.n"), retain: false) }
        // Acknowledged after them: its number says the daemon handled every one before it.
        #expect(try await publisher.publishAcknowledged("end", to: Topic("order.n"), retain: false) == UInt64(count) + 1)
        try await publisher.flush()
        let received = try await deliveries(of: subscription, waitingFor: "\(count + 1) messages") { $0.count == count + 1 }
        #expect(received.map { $0.text ?? "" } == (1...count).map(String.init) + ["end"])
        #expect(received.map(\.sequence) == Array(1...UInt64(count + 1)))
        await subscriber.close()
        await publisher.close()
        try await daemon.stop()
    }

    @Test("64 tasks publishing acknowledged at once: each gets its own number, increasing in its own order, and none is missing")
    func acknowledgedFromManyTasks() async throws {
        let daemon = try await TestDaemon.start()
        let client = try await daemon.client()
        let tasks = 64
        let each = 200
        let numbers = try await withThrowingTaskGroup(of: [UInt64].self) { group in
            for task in 0..<tasks {
                group.addTask {
                    var mine: [UInt64] = []
                    for index in 0..<each { mine.append(try await client.publishAcknowledged("\(task).\(index)", to: Topic("many.t"))) }
                    return mine
                }
            }
            var all: [[UInt64]] = []
            for try await mine in group { all.append(mine) }
            return all
        }
        for mine in numbers { #expect(zip(mine, mine.dropFirst()).allSatisfy { $0 < $1 }, "a task's numbers increase: \(mine.prefix(10))") }
        #expect(numbers.flatMap { $0 }.sorted() == Array(1...UInt64(tasks * each)), "every number once")
        await client.close()
        try await daemon.stop()
    }

    @Test("random interleavings of publish, acknowledged publish, flush and cancellation over a small bound: what returned arrives once, in each task's order; what threw does not", arguments: [1, 2, 3])
    func randomInterleavings(seed: UInt64) async throws {
        let daemon = try await TestDaemon.start()
        let subscriber = try await daemon.client()
        let subscription = try await subscriber.subscribe(to: [TopicPattern("mix.>")], buffer: SubscriptionBufferLimits(highEvents: 100_000, highBytes: 64 << 20))
        // A bound of a few frames, so that publishers often wait for room, where a cancellation lands (about 300 of
        // the operations of the four cancelled tasks threw, per seed, when this was written).
        let publisher = try await NotifyClient.connect(to: daemon.socketPath, publishBuffer: 512)
        try await BackpressureTests.waitForSubscriptions(1, on: publisher)
        let tasks = 8
        let operations = 300
        // Each task's publishes that returned, in call order; a task publishes to a topic of its own.
        let published = try await withThrowingTaskGroup(of: (Int, [String]).self) { group in
            for task in 0..<tasks {
                var random = SeededRandom(seed: seed &* 1_000 &+ UInt64(task))
                let cancelAfter = task % 2 == 0 ? Int(random.next() % UInt64(operations)) : nil
                let worker = Task {
                    var returned: [String] = []
                    let topic = try Topic("mix.t\(task)")
                    for index in 0..<operations {
                        let payload = "\(task).\(index)"
                        do {
                            switch random.next() % 10 {
                            case 0..<6: try await publisher.publish(payload, to: topic, retain: false)
                            case 6..<9: _ = try await publisher.publishAcknowledged(payload, to: topic, retain: false)
                            default:
                                try await publisher.flush()
                                continue
                            }
                            returned.append(payload)
                        } catch is CancellationError {
                            // Nothing was taken; the task goes on with its next operation, still cancelled.
                        }
                    }
                    return returned
                }
                group.addTask {
                    if let cancelAfter {
                        // Cancelled part-way, while it runs: a count of its own deliveries says when.
                        for _ in 0..<cancelAfter { await Task.yield() }
                        worker.cancel()
                    }
                    return (task, try await worker.value)
                }
            }
            var all: [Int: [String]] = [:]
            for try await (task, returned) in group { all[task] = returned }
            return all
        }
        // The client is usable after all of it.
        try await publisher.flush()
        _ = try await publisher.publishAcknowledged("end", to: Topic("mix.end"), retain: false)
        let expected = published.values.reduce(0) { $0 + $1.count }
        let received = try await deliveries(of: subscription, waitingFor: "\(expected) messages and the end") { $0.last?.topic.name == "mix.end" }
        #expect(received.count == expected + 1, "each once, nothing that threw (seed \(seed))")
        for task in 0..<tasks {
            let arrived = received.filter { $0.topic.name == "mix.t\(task)" }.map { $0.text ?? "" }
            #expect(arrived == published[task], "task \(task) in its order (seed \(seed))")
        }
        await subscriber.close()
        await publisher.close()
        try await daemon.stop()
    }

    @Test("a daemon that stops reading holds a publisher back at its bound; resumed, every publish gets through; a publisher cancelled meanwhile leaves the client usable")
    func boundAgainstAStoppedDaemon() async throws {
        let daemon = try await TestDaemon.start()
        let bound = 64 << 10
        let client = try await NotifyClient.connect(to: daemon.socketPath, publishBuffer: bound)
        let payload = ByteBuffer(repeating: UInt8(ascii: "x"), count: 1_000)
        daemon.child.signal(SIGSTOP)
        let published = Atomic(0)
        let count = 20_000  // 20 MB: far past what the sockets and the bound hold
        let publisher = Task {
            for _ in 0..<count {
                try await client.publish(payload, to: Topic("bound.t"), retain: false)
                published.add(1, ordering: .relaxed)
            }
        }
        try await withDeadline(.seconds(30), waitingFor: "the publisher to wait for room") {
            while client.publishOutboxHeld.waiting == 0 { try await Task.sleep(for: .milliseconds(5)) }
        }
        let held = client.publishOutboxHeld
        #expect(held.pending + held.inChannel <= bound + 1_100, "the client holds its bound (and the frame that crossed it): \(held)")
        #expect(published.load(ordering: .relaxed) < count / 4, "held back: \(published.load(ordering: .relaxed)) of \(count) returned")

        // Another task, publishing until it too must wait for room, gives up; the client goes on. (The socket may
        // still take a little while the first waits, so the second publishes until it waits too.)
        let impatientSent = Atomic(0)
        let impatient = Task {
            while true {
                try await client.publish(payload, to: Topic("bound.other"), retain: false)
                impatientSent.add(1, ordering: .relaxed)
            }
        }
        try await withDeadline(.seconds(30), waitingFor: "a second publisher to wait") {
            while client.publishOutboxHeld.waiting < 2 { try await Task.sleep(for: .milliseconds(5)) }
        }
        impatient.cancel()
        await #expect(throws: CancellationError.self) { try await impatient.value }

        daemon.child.signal(SIGCONT)
        try await withDeadline(.seconds(60), waitingFor: "every publish to be taken") { try await publisher.value }
        try await client.flush()
        let stats = try await client.stats()
        let sent = UInt64(count + impatientSent.load(ordering: .relaxed))
        #expect(stats["messages_in"] == sent, "every publish that returned reached the daemon, the cancelled one not: \(stats)")
        try await client.publish("after", to: Topic("bound.after"))
        try await client.flush()
        #expect(try await client.latest(Topic("bound.after"))?.text == "after")
        await client.close()
        try await daemon.stop()
    }

    @Test("what a client published and closed without flush() is written before the connection closes")
    func closeWritesWhatWaits() async throws {
        let daemon = try await TestDaemon.start()
        let client = try await daemon.client()
        for number in 1...1_000 { try await client.publish("\(number)", to: Topic("closing.t")) }
        await client.close()
        let reader = try await daemon.client()
        try await withDeadline(.seconds(30), waitingFor: "the last publish to be buffered") {
            while try await reader.latest(Topic("closing.t"))?.text != "1000" { try await Task.sleep(for: .milliseconds(5)) }
        }
        await reader.close()
        try await daemon.stop()
    }
}

