import NIOCore
import Testing

@testable import NotifyBus
@testable import NotifyBroker
@testable import NotifyProtocol

/// Issue 34, 7: a topic that --max-topics forgets while its history holds messages loses them, and every loss is
/// announced: a subscriber that resumes it is told, by number and by time, across a restart too; and the topic,
/// made again, numbers on instead of starting at 1 (broker and state log, no socket).
@Suite("Topics forgotten for room (broker, no socket)", .timeLimit(.minutes(3)))
struct ForgottenTopicTests {
    static func withRoomFor(_ topics: Int) -> BrokerConfiguration {
        var configuration = ResumeTests.withHistory
        configuration.maxTopics = topics
        return configuration
    }

    @Test("a resume of a topic forgotten for room is told what it missed, by number and by time; made again, it numbers on")
    func resumeAfterForgetting() throws {
        let harness = BrokerHarness(configuration: Self.withRoomFor(2))
        let publisher = harness.connect()
        ResumeTests.publish(3, to: "t.a", from: publisher)
        ResumeTests.publish(1, to: "t.b", from: publisher)
        ResumeTests.publish(1, to: "t.c", from: publisher)
        #expect(harness.broker.topicTable["t.a"] == nil, "t.a was forgotten for t.c")

        let client = harness.connect()
        client.send("#1 SUB t.a since=1\n#2 SUB t.> since=1970-01-01T00:00:00Z\n")
        #expect(ResumeTests.summary(try client.received()) == [
            "DROP#1 t.a 2 2-3", "OK#1",
            "LAST#2 t.b 1", "LAST#2 t.c 1", "DROP#2 t.a 3 1-3", "OK#2",
        ])

        ResumeTests.publish(1, to: "t.a", from: publisher)
        let again = harness.connect()
        again.send("#3 SUB t.a since=1\n")
        #expect(ResumeTests.summary(try again.received()) == ["DROP#3 t.a 2 2-3", "LAST#3 t.a 4", "OK#3"], "4, not 1")
    }

    @Test("past what it remembers, a resume by time is told of the messages of topics it no longer remembers")
    func beyondWhatIsRemembered() throws {
        let harness = BrokerHarness(configuration: Self.withRoomFor(1))
        let publisher = harness.connect()
        for name in ["a", "b", "c"] { ResumeTests.publish(2, to: "t.\(name)", from: publisher) }
        // t.a was forgotten for t.b, t.b for t.c; one name is remembered (as many as the table holds): t.b.
        #expect(harness.broker.topicTable.forgottenTopics.count == 1 && harness.broker.topicTable.forgottenTopics["t.b"] != nil)
        let client = harness.connect()
        client.send("#1 SUB t.> since=1970-01-01T00:00:00Z\n#2 SUB t.a since=1\n")
        #expect(ResumeTests.summary(try client.received()) == [
            "LAST#1 t.c 1", "LAST#1 t.c 2", "DROP#1 t.b 2 1-2", "DROP#1 $notifyd.dropped 2 0-0", "OK#1",
            "DROP#2 $notifyd.dropped 2 0-0", "OK#2",
        ])
    }

    @Test("across a restart, a topic forgotten for room keeps its number: a resume is told, and it numbers on")
    func acrossRestart() throws {
        let directory = StateLogTests.Directory()
        do {
            let harness = try HistoryPersistenceTests.start(in: directory, Self.withRoomFor(2))
            let publisher = harness.connect()
            ResumeTests.publish(3, to: "t.a", from: publisher)
            ResumeTests.publish(1, to: "t.b", from: publisher)
            ResumeTests.publish(1, to: "t.c", from: publisher)
            try harness.broker.saveState()
        }
        let harness = try HistoryPersistenceTests.start(in: directory, Self.withRoomFor(2))
        #expect(harness.broker.topicTable.count == 2 && harness.broker.topicTable["t.a"] == nil, "remembered, not a topic again")
        let client = harness.connect()
        client.send("#1 SUB t.a since=1\n#2 SUB t.> since=1970-01-01T00:00:00Z\n")
        // Restored topics are walked in no particular order.
        #expect(ResumeTests.summary(try client.received()).sorted() == [
            "DROP#1 t.a 2 2-3", "DROP#2 t.a 3 1-3", "LAST#2 t.b 1", "LAST#2 t.c 1", "OK#1", "OK#2",
        ])
        // A resume by time after its last message is told nothing of it: its time was kept too.
        let last = harness.broker.topicTable.forgottenTopics["t.a"]!.newest
        client.send("#3 SUB t.> since=\(PublishTime(microsecondsSinceEpoch: last.microsecondsSinceEpoch + 1).rfc3339)\n")
        #expect(ResumeTests.summary(try client.received()).filter { $0.hasPrefix("DROP") }.isEmpty)
        client.send("#4 PUB t.a 1 noretain ack\nx\n")
        #expect(ResumeTests.summary(try client.received()).suffix(2) == ["MSG t.a 4", "OK#4"])
    }

    @Test("publish times never go back across a restart, where only a forgotten topic's record kept the last one")
    func timesAcrossRestart() throws {
        var configuration = Self.withRoomFor(2)
        configuration.history = .off
        let directory = StateLogTests.Directory()
        let forgottenAt: PublishTime
        do {
            let harness = try HistoryPersistenceTests.start(in: directory, configuration)
            let publisher = harness.connect()
            ResumeTests.publish(1, to: "t.b", from: publisher)
            ResumeTests.publish(1, to: "t.c", from: publisher)
            ResumeTests.publish(1, to: "t.b", from: publisher)
            ResumeTests.publish(1, to: "t.a", from: publisher)
            // t.b was listed first, so it is forgotten for t.a, with the time of its second message.
            forgottenAt = try #require(harness.broker.topicTable.forgottenTopics["t.b"]?.newest)
            try harness.broker.saveState()
        }
        let harness = try HistoryPersistenceTests.start(in: directory, configuration)
        #expect(harness.broker.clock.latest >= forgottenAt, "no frame keeps a time here (no history, nothing retained)")
    }

    @Test("past what it remembers, the count of what it no longer remembers survives a restart too; a lowered bound applies at once")
    func unrememberedAcrossRestart() throws {
        let directory = StateLogTests.Directory()
        do {
            let harness = try HistoryPersistenceTests.start(in: directory, Self.withRoomFor(1))
            let publisher = harness.connect()
            for name in ["a", "b", "c"] { ResumeTests.publish(2, to: "t.\(name)", from: publisher) }
            try harness.broker.saveState()
        }
        let harness = try HistoryPersistenceTests.start(in: directory, Self.withRoomFor(1))
        #expect(harness.broker.topicTable.forgottenTopics.unremembered.messages == 2)
        #expect(harness.broker.topicTable.forgottenTopics["t.b"]?.sequence == 2)

        let roomier = BrokerHarness(configuration: Self.withRoomFor(2))
        let publisher = roomier.connect()
        for name in ["a", "b", "c", "d"] { ResumeTests.publish(2, to: "t.\(name)", from: publisher) }
        #expect(roomier.broker.topicTable.forgottenTopics.count == 2)
        roomier.broker.reconfigure(Self.withRoomFor(1))
        #expect(roomier.broker.topicTable.forgottenTopics.count == 1 && roomier.broker.topicTable.forgottenTopics["t.b"] != nil)
        #expect(roomier.broker.topicTable.forgottenTopics.unremembered.messages == 2, "t.a's two, counted at once")
    }
}
