// The README's API as a user's own package uses it, from top-level code (which runs on the main actor) and from a
// `@MainActor` type: the figures issue 48 asks for. Built and run by Benchmarks/UserPackage/run.sh, release, against
// a notifyd of its own; each line is one case of one run.
import NotifyCenter

struct Status: NotifyMessage, Codable {
    static let topic = Topic.literal("user.status")
    var host: String
    var number: Int
}

let arguments = CommandLine.arguments
let socket = arguments[1]
let count = Int(arguments[2]) ?? 1_000_000
let typedCount = count / 4

func rate(_ messages: Int, since start: ContinuousClock.Instant) -> Int {
    let elapsed = ContinuousClock.now - start
    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    return Int(Double(messages) / seconds)
}

/// The cases, each run on its caller's actor (`isolation`): the main actor, from top-level code and from a
/// `@MainActor` type alike. Each line printed is "<where> <case> <messages per second>".
struct Cases {
    let label: String

    func report(_ name: String, _ value: Int) {
        print("\(label) \(name) \(value)")
    }

    /// One call per 16 B message, then flush.
    func publish(isolation: isolated (any Actor)? = #isolation) async throws {
        let client = try await NotifyClient.connect(to: socket)
        let topic = Topic.literal("user.publish")
        let start = ContinuousClock.now
        for _ in 0..<count { try await client.publish("0123456789abcdef", to: topic, retain: false) }
        try await client.flush()
        report("publish", rate(count, since: start))
        await client.close()
    }

    /// A subscription iterated beside one-call-per-message publishing, both on the caller's actor.
    func iterate(isolation: isolated (any Actor)? = #isolation) async throws {
        let subscriber = try await NotifyClient.connect(to: socket)
        let publisher = try await NotifyClient.connect(to: socket)
        let subscription = try await subscriber.subscribe(to: [TopicPattern("user.iterate.>")])
        let receiving = Task {
            isolation?.preconditionIsolated("the consumer runs where the publisher does")
            var received = 0
            var dropped = 0
            for try await event in subscription {
                switch event {
                case .message(let delivery):
                    if delivery.topic.name == "user.iterate.end" { return (received, dropped) }
                    received += 1
                case .dropped(let notice):
                    dropped += Int(clamping: notice.count)
                }
            }
            return (received, dropped)
        }
        let topic = Topic.literal("user.iterate.m")
        let start = ContinuousClock.now
        for _ in 0..<count { try await publisher.publish("0123456789abcdef", to: topic, retain: false) }
        try await publisher.publishAcknowledged("end", to: Topic.literal("user.iterate.end"), retain: false)
        let published = rate(count, since: start)
        let (received, dropped) = try await receiving.value
        report("iterate-publish", published)
        report("iterate-receive", rate(received, since: start))
        report("iterate-dropped", dropped)
        await subscriber.close()
        await publisher.close()
    }

    /// publishAcknowledged from 64 tasks, each on the main actor.
    func acknowledged64(isolation: isolated (any Actor)? = #isolation) async throws {
        let client = try await NotifyClient.connect(to: socket)
        let topic = Topic.literal("user.ack")
        let each = max(1, count / 4 / 64)
        let start = ContinuousClock.now
        let tasks = (0..<64).map { _ in
            Task { @MainActor in
                for _ in 0..<each { try await client.publishAcknowledged("0123456789abcdef", to: topic, retain: false) }
            }
        }
        for task in tasks { try await task.value }
        report("ack-64", rate(64 * each, since: start))
        await client.close()
    }

    /// NotifyCenter, typed: one center sends, another's sequence is iterated on the caller's actor.
    func center(isolation: isolated (any Actor)? = #isolation) async throws {
        let subscriber = try await NotifyCenter.connect(to: socket)
        let publisher = try await NotifyCenter.connect(to: socket)
        let statuses = try await subscriber.messages(of: Status.self)
        let total = typedCount
        let receiving = Task {
            isolation?.preconditionIsolated("the consumer runs where the poster does")
            var received = 0
            for try await status in statuses.values {
                received += 1
                if status.value.number == total { break }
            }
            return received
        }
        let start = ContinuousClock.now
        for number in 1...total { try await publisher.send(Status(host: "db1.example.org", number: number), retain: false) }
        let received = try await receiving.value
        report("center", rate(received, since: start))
        await subscriber.close()
        await publisher.close()
    }
}

/// A view model's way in: the same cases, called from a `@MainActor` type.
@MainActor
final class Model {
    func run() async throws {
        let cases = Cases(label: "main-actor-type")
        try await cases.publish()
        try await cases.iterate()
        try await cases.acknowledged64()
        try await cases.center()
    }
}

// Top-level code: on the main actor, as Swift runs it.
let topLevel = Cases(label: "top-level")
try await topLevel.publish()
try await topLevel.iterate()
try await topLevel.acknowledged64()
try await topLevel.center()
try await Model().run()
