import NIOCore
import Testing

@testable import NotifyBus
@testable import NotifyBroker
@testable import NotifyProtocol

/// A publisher's last topic, remembered per connection so a run of publishes to one topic skips the table's lookup.
@Suite("Last topic per connection", .timeLimit(.minutes(3)))
struct LastTopicCacheTests {
    @Test("a topic the table forgot meanwhile is not used again from the cache: it is made again, in the table, numbering on")
    func forgottenTopic() throws {
        var configuration = BrokerConfiguration.default
        configuration.maxTopics = 1
        let harness = BrokerHarness(configuration: configuration)
        let first = harness.connect()
        first.send("PUB a 1 noretain ack\nx\nPUB a 1 noretain ack\nx\n")
        #expect(try first.received() == [.ok(requestID: nil, value: 1), .ok(requestID: nil, value: 2)])
        // Another connection's topic takes the only place: "a", with nothing buffered, is forgotten.
        let second = harness.connect()
        second.send("PUB b 1 noretain\ny\n")
        first.send("PUB a 1 noretain ack\nz\n")
        #expect(try first.received() == [.ok(requestID: nil, value: 3)], "a new topic, numbering on from the one forgotten")
        #expect(harness.broker.statistics.topics == 1)
        first.send("TOPICS\n")
        guard case .topics(_, let topics)? = try first.received().first else {
            Issue.record("no TOPICS reply")
            return
        }
        #expect(topics.map(\.topic.name) == ["a"], "in the table, where LATEST and TOPICS find it")
    }

    @Test("a closed connection is let go when the topic it last published to and subscribed to is forgotten")
    func closedSessionFreed() throws {
        // A daemon runs for years: a session held by its last topic, which lists it among its subscribers (by a
        // wildcard, whose list is only rebuilt at the topic's next publish), and holding that topic in turn, would
        // be memory nothing ever gives back once the table forgets the topic.
        var configuration = BrokerConfiguration.default
        configuration.maxTopics = 1
        // Without history, whose budget lists hold a forgotten topic until they next compact.
        configuration.history = .off
        let harness = BrokerHarness(configuration: configuration)
        weak var session: Session?
        weak var topic: TopicState?
        do {
            let client = harness.connect()
            session = client.session
            client.send("SUB t.*\nPUB t.a 1 noretain\nx\n")
            #expect(try client.deliveries() == ["x"])
            topic = client.session.lastPublishedTopic
            harness.broker.close(client.session)
        }
        #expect(topic != nil)
        harness.connect().send("PUB u 1 noretain\ny\n")
        #expect(harness.broker.topicTable["t.a"] == nil, "forgotten, to make room for u")
        #expect(session == nil, "the broker holds nothing of a closed connection")
        #expect(topic == nil, "nor of a topic it forgot")
    }

    @Test("a topic forgotten while a connection still holds it as its last topic lets go of its subscribers")
    func forgottenTopicLetsGoOfSubscribers() throws {
        var configuration = BrokerConfiguration.default
        configuration.maxTopics = 1
        let harness = BrokerHarness(configuration: configuration)
        let publisher = harness.connect()
        weak var subscriber: Session?
        do {
            let client = harness.connect()
            subscriber = client.session
            client.send("SUB t.*\n")
            publisher.send("PUB t.a 1 noretain\nx\n")
            #expect(try client.deliveries() == ["x"])
            harness.broker.close(client.session)
        }
        harness.connect().send("PUB u 1 noretain\ny\n")
        #expect(publisher.session.lastPublishedTopic?.isForgotten == true, "the publisher still holds t.a, forgotten")
        #expect(subscriber == nil, "t.a's list of subscribers, stale since, no longer holds the closed one")
    }
}
