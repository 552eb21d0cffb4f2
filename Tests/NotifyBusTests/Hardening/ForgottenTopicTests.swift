import NIOCore
import Testing

@testable import NotifyBus

/// Issue 34, 7: a topic that --max-topics forgets while its history holds messages loses them, and every loss is
/// announced: a subscriber that resumes it is told, by number and by time, across a restart too; and the topic,
/// made again, numbers on instead of starting at 1 (broker and state log, no socket).
@Suite("Topics forgotten for room (broker, no socket)")
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
        let client = harness.connect()
        client.send("#1 SUB t.a since=1\n#2 PUB t.a 1 noretain ack\nx\n")
        #expect(ResumeTests.summary(try client.received()) == ["DROP#1 t.a 2 2-3", "OK#1", "MSG t.a 4", "OK#2"])
    }
}
