import NIOCore
import Testing

@testable import NotifyBus

/// A publisher's last topic, remembered per connection so a run of publishes to one topic skips the table's lookup.
@Suite("Last topic per connection")
struct LastTopicCacheTests {
    @Test("a topic the table forgot meanwhile is not used again from the cache: it starts over, in the table")
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
        #expect(try first.received() == [.ok(requestID: nil, value: 1)], "a new topic, numbered from 1")
        #expect(harness.broker.statistics.topics == 1)
        first.send("TOPICS\n")
        guard case .topics(_, let topics)? = try first.received().first else {
            Issue.record("no TOPICS reply")
            return
        }
        #expect(topics.map(\.topic.name) == ["a"], "in the table, where LATEST and TOPICS find it")
    }
}
