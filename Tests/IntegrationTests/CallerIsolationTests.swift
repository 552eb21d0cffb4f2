import Dispatch
import NIOCore
import NotifyBus
import Synchronization
import Testing

/// A serial executor that counts the jobs it is given: each is a hop onto the actor that runs on it.
private final class CountingExecutor: SerialExecutor {
    private let queue = DispatchQueue(label: "counting-executor")
    let enqueued = Atomic<Int>(0)

    func enqueue(_ job: consuming ExecutorJob) {
        enqueued.add(1, ordering: .relaxed)
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedSerialExecutor()) }
    }

    func asUnownedSerialExecutor() -> UnownedSerialExecutor { UnownedSerialExecutor(ordinary: self) }
}

/// An actor on a counting executor, as the main actor runs top-level code and `@MainActor` types: an async call that
/// leaves it for the global executor costs a job to come back, one per call.
private actor Caller {
    let executor = CountingExecutor()
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    /// Publishes `count` messages from the actor, and returns the jobs the actor was given meanwhile.
    func publish(_ count: Int, with client: NotifyClient) async throws -> Int {
        let before = executor.enqueued.load(ordering: .relaxed)
        let payload = ByteBuffer(string: "0123456789abcdef")
        let topic = try Topic("isolation.publish")
        for _ in 0..<count { try await client.publish(payload, to: topic, retain: false) }
        return executor.enqueued.load(ordering: .relaxed) - before
    }

    /// Takes `count` messages of `subscription` on the actor, and returns them and the jobs the actor was given.
    func iterate(_ count: Int, of subscription: NotifySubscription) async throws -> (messages: Int, jobs: Int) {
        let before = executor.enqueued.load(ordering: .relaxed)
        var messages = 0
        for try await event in subscription {
            if case .message = event { messages += 1 }
            if messages == count { break }
        }
        return (messages, executor.enqueued.load(ordering: .relaxed) - before)
    }
}

/// How often a main-actor task ran, and whether it still should.
@MainActor
private final class MainActorTicks {
    var ticks = 0
    var running = true
}

/// The library's async calls run on their caller's executor where they need not suspend (issue 48, item 0): from the
/// main actor, or any actor, a publish or the next message of a batch at hand costs no hop to the global executor
/// and back, which made the library 30 times slower there.
@Suite("The library from an actor: no hop per call (real notifyd)", .timeLimit(.minutes(3)))
struct CallerIsolationTests {
    @Test("10,000 publishes from an actor: the actor is given a few jobs (a full outbox, say), not one per publish")
    func publishStaysOnTheActor() async throws {
        let daemon = try await TestDaemon.start()
        let client = try await NotifyClient.connect(to: daemon.socketPath)
        let caller = Caller()
        let jobs = try await caller.publish(10_000, with: client)
        try await client.flush()
        #expect(jobs < 500, "\(jobs) hops onto the actor for 10,000 publishes")
        await client.close()
        try await daemon.stop()
    }

    @Test("10,000 publishes from the main actor keep it, giving it up every 1,024: another main-actor task that runs whenever it is free runs a few times, neither never nor between every two publishes")
    @MainActor
    func publishStaysOnTheMainActor() async throws {
        let daemon = try await TestDaemon.start()
        let client = try await NotifyClient.connect(to: daemon.socketPath)
        let payload = ByteBuffer(string: "0123456789abcdef")
        let topic = try Topic("isolation.main")
        // Runs each time the main actor is free: a publish that left it for the global executor and came back
        // would let it run once per publish.
        let count = MainActorTicks()
        let ticker = Task { @MainActor in
            while count.running {
                count.ticks += 1
                await Task.yield()
            }
        }
        await Task.yield()
        let before = count.ticks
        for _ in 0..<10_000 { try await client.publish(payload, to: topic, retain: false) }
        let during = count.ticks - before
        count.running = false
        await ticker.value
        try await client.flush()
        #expect(during < 500, "another main-actor task ran \(during) times during 10,000 publishes")
        // A loop that never suspended would keep a subscription's consumer on the main actor from its messages until
        // it ended, and the daemon would drop them.
        #expect(during >= 9, "the publisher gave the main actor up \(during) times in 10,000 publishes, not every 1,024")
        await client.close()
        try await daemon.stop()
    }

    @Test("10,000 messages iterated on an actor: a job per batch the connection brings, not one per message")
    func iterationStaysOnTheActor() async throws {
        let daemon = try await TestDaemon.start()
        let subscriber = try await NotifyClient.connect(to: daemon.socketPath)
        let subscription = try await subscriber.subscribe(to: [TopicPattern("isolation.iterate")])
        let publisher = try await NotifyClient.connect(to: daemon.socketPath)
        let topic = try Topic("isolation.iterate")
        try await publisher.publish((0..<10_000).map { _ in ByteBuffer(string: "0123456789abcdef") }, to: topic, retain: false)
        try await publisher.flush()
        let caller = Caller()
        let (messages, jobs) = try await withDeadline(.seconds(60), waitingFor: "10,000 messages on the actor") {
            try await caller.iterate(10_000, of: subscription)
        }
        #expect(messages == 10_000)
        #expect(jobs < 5_000, "\(jobs) hops onto the actor for 10,000 messages")
        await publisher.close()
        await subscriber.close()
        try await daemon.stop()
    }
}
