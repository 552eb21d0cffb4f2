import Testing

@testable import NotifyBus
@testable import NotifyBroker
@testable import NotifyProtocol
import TestSupport

/// Each topic caches the sessions its messages go to; those caches are bounded together, and the stale ones are let
/// go when the daemon is idle.
@Suite("Cached subscriber lists", .timeLimit(.minutes(3)))
struct SubscriberListCacheTests {
    /// The entries the topics' lists hold, counted the long way.
    static func entries(in broker: Broker) -> Int {
        broker.topicTable.all.reduce(0) { $0 + $1.subscribers.count }
    }

    /// A broker whose lists hold `bound` entries in all, without history (which does not change what lists hold).
    static func harness(bound: Int) -> BrokerHarness {
        var configuration = BrokerConfiguration.default
        configuration.maxCachedSubscriberEntries = bound
        configuration.history = .off
        return BrokerHarness(configuration: configuration)
    }

    @Test("wildcard subscribers times topics stays within the bound, and every message still reaches every subscriber")
    func bounded() throws {
        let harness = Self.harness(bound: 10)
        let subscribers = (0..<4).map { _ in harness.connect() }
        for subscriber in subscribers { subscriber.send("SUB t.*\n") }
        let publisher = harness.connect()
        var highest = 0
        for topic in 0..<20 {
            publisher.send("PUB t.\(topic) 2\n\(topic % 10)\(topic / 10)\n")
            let cached = harness.broker.routing.cachedEntries
            #expect(cached == Self.entries(in: harness.broker), "the count is the lists' own")
            #expect(cached <= 10, "after the publish of t.\(topic)")
            highest = max(highest, cached)
        }
        #expect(highest > 4, "several lists were cached at once before the bound let them go")
        let expected = (0..<20).map { "\($0 % 10)\($0 / 10)" }
        for subscriber in subscribers { #expect(try subscriber.deliveries() == expected) }
        // A list let go is made again, from the subscriptions as they are now.
        subscribers[0].send("UNSUB t.*\n")
        publisher.send("PUB t.0 1\nz\n")
        #expect(try subscribers[0].deliveries() == [])
        for subscriber in subscribers.dropFirst() { #expect(try subscriber.deliveries() == ["z"]) }
    }

    @Test("the count stays the lists' own through subscribes, unsubscribes, closes, clears and forgotten topics")
    func countFollowsTheLists() throws {
        var random = SeededRandom(seed: SeededRandom.seed(default: 18))
        var configuration = BrokerConfiguration.default
        configuration.maxCachedSubscriberEntries = 12
        configuration.maxTopics = 6
        let harness = BrokerHarness(configuration: configuration)
        var clients = (0..<4).map { _ in harness.connect() }
        let patterns = ["a.*", "a.1", "a.2", ">", "b.>", "b.3"]
        for step in 0..<2_000 {
            let client = clients[Int.random(in: 0..<clients.count, using: &random)]
            let topic = "\(["a", "b"].randomElement(using: &random)!).\(Int.random(in: 0..<8, using: &random))"
            switch Int.random(in: 0..<10, using: &random) {
            case 0...1: client.send("SUB \(patterns.randomElement(using: &random)!)\n")
            case 2: client.send("UNSUB \(patterns.randomElement(using: &random)!)\n")
            case 3: client.send("CLEAR \(topic)\n")
            case 4:
                harness.broker.close(client.session)
                clients.removeAll { $0 === client }
                clients.append(harness.connect())
            case 5: harness.broker.releaseIdleMemory()
            default: client.send("PUB \(topic) 1\(Bool.random(using: &random) ? " noretain" : "")\nx\n")
            }
            _ = try client.received()
            let cached = harness.broker.routing.cachedEntries
            #expect(cached == Self.entries(in: harness.broker), "step \(step)")
            // Four connections at most in one list, so the bound holds after every step.
            #expect(cached <= 12, "step \(step)")
        }
    }

    @Test("stale lists, and the closed connections they hold, are let go when asked (the daemon asks when idle)")
    func staleListsReleased() throws {
        let harness = BrokerHarness()
        let staying = harness.connect()
        staying.send("SUB t.*\n")
        weak var leaving: Session?
        do {
            let client = harness.connect()
            leaving = client.session
            client.send("SUB t.*\n")
            let publisher = harness.connect()
            for topic in ["t.a", "t.b", "t.c"] { publisher.send("PUB \(topic) 1\nx\n") }
            #expect(harness.broker.routing.cachedEntries == 6)
            harness.broker.close(client.session)
            harness.broker.close(publisher.session)
        }
        #expect(leaving != nil, "the lists, stale since it left, still hold it")
        harness.broker.releaseIdleMemory()
        #expect(leaving == nil)
        #expect(harness.broker.routing.cachedEntries == 0)
        harness.connect().send("PUB t.a 1\ny\n")
        #expect(harness.broker.routing.cachedEntries == 1)
        #expect(try staying.deliveries() == ["x", "x", "x", "y"])
    }

    @Test("past the bound, stale lists go first: lists still valid stay while that is enough")
    func staleFirst() throws {
        let harness = Self.harness(bound: 10)
        let subscribers = (0..<3).map { _ in harness.connect() }
        for subscriber in subscribers { subscriber.send("SUB t.*\n") }
        let publisher = harness.connect()
        publisher.send("PUB t.0 1\nx\nPUB t.1 1\nx\nPUB t.2 1\nx\n")
        #expect(harness.broker.routing.cachedEntries == 9)
        // A new wildcard subscription: every list is stale now.
        let late = harness.connect()
        late.send("SUB u.*\n")
        publisher.send("PUB u.0 1\ny\n")
        #expect(harness.broker.routing.cachedEntries == 10, "within the bound: nothing let go")
        publisher.send("PUB u.1 1\ny\n")
        #expect(harness.broker.routing.cachedEntries == 2, "the stale lists of t.0 … t.2 went")
        let u0 = try #require(harness.broker.topicTable["u.0"])
        #expect(u0.subscribersGeneration == harness.broker.routing.wildcardGeneration && u0.subscribers.count == 1, "u.0's stayed")
        #expect(try late.deliveries() == ["y", "y"])
    }
}
