import NIOCore
import Testing

@testable import NotifyBus
@testable import NotifyBroker
@testable import NotifyProtocol
import TestSupport

/// Issue 14: what the topic table costs, and what forgetting a topic may take from its subscribers.
@Suite("The topic table under abuse (broker, no socket)", .timeLimit(.minutes(3)))
struct TopicTableTests {
    @Test("topics that each buffer a message leave the list of topics the broker may forget short, and one cleared is forgotten first")
    func forgettableListStaysShort() throws {
        var configuration = BrokerConfiguration.default
        configuration.maxTopics = 20_000
        let harness = BrokerHarness(configuration: configuration)
        let client = harness.connect()
        client.send((0..<10_000).map { "PUB t.\($0) 1\nx\n" }.joined())
        #expect(harness.broker.statistics.topics == 10_000)
        #expect(harness.broker.forgettableTopicCount <= 1_025, "\(harness.broker.forgettableTopicCount) listed")
        client.send("CLEAR t.5\n" + (10_000..<20_001).map { "PUB t.\($0) 1\nx\n" }.joined())
        #expect(harness.broker.topicTable["t.5"] == nil, "the one topic without a message made room")
        #expect(harness.broker.topicTable["t.4"] != nil)
    }

    @Test("PUB and CLEAR of one topic in a loop do not grow the list of topics the broker may forget")
    func clearInALoop() throws {
        let harness = BrokerHarness()
        let client = harness.connect()
        client.send(String(repeating: "PUB t 1\nx\nCLEAR t\n", count: 10_000))
        #expect(harness.broker.forgettableTopicCount == 1)
    }

    @Test("a full topic table forgets a topic nobody subscribes to, never one with a subscriber: its numbers go on")
    func subscribedTopicsAreKept() throws {
        var configuration = BrokerConfiguration.default
        configuration.maxTopics = 2
        let harness = BrokerHarness(configuration: configuration)
        let subscriber = harness.connect()
        subscriber.send("SUB watched\n")
        let publisher = harness.connect()
        publisher.send("PUB watched 1 noretain\n1\nPUB idle 1 noretain\n1\n#1 PUB new 1 noretain ack\n1\n#2 PUB watched 1 noretain ack\n2\n")
        #expect(try publisher.received() == [.ok(requestID: 1, value: 1), .ok(requestID: 2, value: 2)],
                "idle was forgotten for new; watched kept its numbers")
        #expect(try subscriber.deliveries() == ["1", "2"])

        // Every topic has a subscriber now: a new one is refused rather than take a subscriber's numbers.
        subscriber.send("SUB new\n")
        publisher.send("#3 PUB other 1 noretain ack\n1\n#4 PUB watched 1 noretain ack\n3\n")
        let replies = try publisher.received()
        #expect(replies.map(errorCode) == [.limitReached, nil])
        #expect(replies.last == .ok(requestID: 4, value: 3))
    }

    @Test("a topic forgotten and made again within one batch numbers on from its last number, stamped later")
    func renumberedInOneBatch() throws {
        var configuration = BrokerConfiguration.default
        configuration.maxTopics = 1
        let harness = BrokerHarness(configuration: configuration)
        let monitor = harness.connect()
        monitor.send("SUB >\n")
        _ = try monitor.received()
        let publisher = harness.connect()
        publisher.send("PUB t 3 noretain\none\nPUB u 3 noretain\ntwo\nPUB t 5 noretain\nthree\n")
        let deliveries = try monitor.received().compactMap(delivery)
        #expect(deliveries.map { "\($0.topic.name) \($0.sequence)" } == ["t 1", "u 1", "t 2"], "t was forgotten for u, and u for t")
        #expect(deliveries[2].time > deliveries[0].time)
        var delivered = DeliveredMessages()
        delivered.record(deliveries[0], isLive: true)
        delivered.record(deliveries[1], isLive: true)
        #expect(!delivered.isRepeat(deliveries[2]), "the new t's first message is new to a resuming subscriber")
    }

    @Test("a wildcard subscriber keeps no topic from being forgotten; a topic whose subscriber by name left may be again")
    func wildcardsKeepNothing() throws {
        var configuration = BrokerConfiguration.default
        configuration.maxTopics = 2
        let harness = BrokerHarness(configuration: configuration)
        let monitor = harness.connect()
        monitor.send("SUB >\nSUB kept\n")
        let publisher = harness.connect()
        publisher.send((1...50).map { "#\($0) PUB t\($0) 1 noretain ack\nx\n" }.joined())
        #expect(try publisher.received().allSatisfy { errorCode($0) == nil }, "each new topic took the place of an older one")
        publisher.send("#1 PUB kept 1 noretain ack\nx\n#2 PUB a 1 noretain ack\nx\n#3 PUB b 1 noretain ack\nx\n")
        #expect(try publisher.received().map(errorCode) == [nil, nil, nil], "kept has a subscriber by name; the others go")
        monitor.send("UNSUB kept\n")
        publisher.send("#4 PUB c 1 noretain ack\nx\n#5 PUB d 1 noretain ack\nx\n")
        #expect(harness.broker.topicTable["kept"] == nil, "once unsubscribed, kept could be forgotten")
        #expect(harness.broker.topicTable.forgottenTopics["kept"]?.sequence == 1)
        publisher.send("#6 PUB kept 1 noretain ack\nx\n")
        #expect(try publisher.received().last == .ok(requestID: 6, value: 2), "made again, it numbers on")
    }
}

/// Issue 14: what a stalled subscriber's queue keeps about what it dropped stays bounded, however many topics.
@Suite("Drop records of a stalled subscriber (broker, no socket)", .timeLimit(.minutes(3)))
struct DropRecordTests {
    @Test("drops over 5,000 distinct topics keep 1,024 notices and one for the rest; the counts add up")
    func manyTopics() throws {
        let harness = OutboundQueueTests.harness(messages: 10)
        let subscriber = harness.connect()
        subscriber.send("SUB leak.>\n")
        _ = try subscriber.received()
        subscriber.transport.isWritable = false
        let publisher = harness.connect()
        publisher.send((1...5_000).map { "PUB leak.\($0) 0 noretain\n\n" }.joined())
        #expect(subscriber.session.outbox.recordCounts.drops == OutboundQueue.dropRecordLimit)
        OutboundQueueTests.resume(subscriber)
        let frames = try subscriber.received()
        let notices = frames.compactMap { frame -> DropNotice? in
            if case .dropped(let notice) = frame { return notice }
            return nil
        }
        #expect(notices.count == OutboundQueue.dropRecordLimit + 1)
        #expect(notices.last?.isAboutManyTopics == true)
        #expect(notices.reduce(0) { $0 + $1.count } == 4_990, "all but the 10 queued were announced")
        #expect(frames.compactMap(delivery).map(\.topic.name) == (4_991...5_000).map { "leak.\($0)" })
    }

    @Test("a latest-only queue that never empties forgets the topics that left it")
    func latestOnlyTable() throws {
        let harness = OutboundQueueTests.harness(messages: 10)
        let subscriber = harness.connect()
        subscriber.send("SUB leak.> overflow=latest-only\n")
        _ = try subscriber.received()
        subscriber.transport.isWritable = false
        let publisher = harness.connect()
        publisher.send((1...5_000).map { "PUB leak.\($0) 0 noretain\n\n" }.joined())
        #expect(subscriber.session.outbox.recordCounts.newest <= 10, "only the queued topics are remembered")
    }
}

/// Issue 14, "The topic table filled for free": 0-byte buffered messages cost no bytes, but each holds a topic.
@Suite("Buffered topics per user (broker, no socket)", .timeLimit(.minutes(3)))
struct RetainedTopicsPerUserTests {
    @Test("one uid's 0-byte buffered messages stop at its topic limit; other uids and its own topics go on")
    func zeroByteTopics() throws {
        var configuration = BrokerConfiguration.default
        configuration.maxRetainedTopicsPerUser = 100
        let harness = BrokerHarness(configuration: configuration)
        let flooder = harness.connect(uid: 1000)
        flooder.send((1...150).map { "#\($0) PUB free.\($0) 0\n\n" }.joined())
        let refused = try flooder.received()
        #expect(refused.count == 50 && refused.allSatisfy { errorCode($0) == .limitReached }, "\(refused.prefix(2))")
        guard case .error(let error) = refused.first else { return }
        #expect(error.message.hasPrefix("uid 1000 already has buffered messages in 100 topics (the limit per user)"))
        #expect(harness.broker.statistics.retainedTopics == 100)

        flooder.send("#1 PUB free.1 0 ack\n\n#2 PUB free.151 1 noretain ack\nx\n")
        #expect(try flooder.received().map(errorCode) == [nil, nil], "its own topics, and publishing without retaining, go on")
        let other = harness.connect(uid: 1001)
        other.send("#1 PUB mine 0 ack\n\n")
        #expect(try other.received() == [.ok(requestID: 1, value: 1)], "another uid is not held back")
        flooder.send("CLEAR free.1\n#3 PUB free.152 0 ack\n\n")
        #expect(try flooder.received().last == .ok(requestID: 3, value: 1), "a cleared topic frees its place")
    }
}

/// Issue 14: a `TOPICS` reply is one page, however many topics the daemon knows.
@Suite("TOPICS in pages (broker, no socket)", .timeLimit(.minutes(3)))
struct TopicsPagesTests {
    static func names(_ frames: [ServerFrame]) -> [String] {
        guard case .topics(_, let infos)? = frames.first else { return [] }
        return infos.map(\.topic.name)
    }

    @Test("25,000 topics come as pages of 10,000 in name order, each after the last of the one before")
    func pages() throws {
        let harness = BrokerHarness()
        let client = harness.connect()
        let all = (0..<25_000).map { "p." + String(String(100_000 + $0).dropFirst()) }
        client.send(all.shuffled().map { "PUB \($0) 0 noretain\n\n" }.joined())
        client.send("TOPICS\n")
        let first = Self.names(try client.received())
        #expect(first == Array(all.prefix(10_000)))
        client.send("TOPICS p.> after=\(first.last!)\n")
        let second = Self.names(try client.received())
        #expect(second == Array(all[10_000..<20_000]))
        client.send("TOPICS after=\(second.last!)\n")
        #expect(Self.names(try client.received()) == Array(all.suffix(5_000)))
        client.send("TOPICS p.00001 after=p.00000\nTOPICS p.00001 after=p.00001\n")
        let literal = try client.received()
        #expect(literal.count == 2)
        #expect(Self.names([literal[0]]) == ["p.00001"] && Self.names([literal[1]]) == [])
    }
}

/// Issue 14, "Cheap requests with O(topics) work": a pattern that starts with a literal token walks that token's
/// topics, not the table.
@Suite("Pattern lookups by first token (broker, no socket)", .timeLimit(.minutes(3)))
struct TopicGroupsTests {
    @Test("SUB backup.* latest and TOPICS backup.> walk the 10 backup topics, not the 100,000 others")
    func narrowWalk() throws {
        let harness = BrokerHarness()
        let client = harness.connect()
        client.send((0..<100_000).map { "PUB bulk.\($0) 1 noretain\nx\n" }.joined())
        client.send((0..<10).map { "PUB backup.host\($0) 2\nok\n" }.joined())
        _ = try client.received()
        let before = harness.broker.workDone
        client.send("SUB backup.* latest\nTOPICS backup.>\n")
        let frames = try client.received()
        let replayed = frames.filter { if case .latest = $0 { true } else { delivery($0) != nil } }
        #expect(replayed.count == 10, "\(frames.prefix(3))")
        #expect(TopicsPagesTests.names(frames.filter { if case .topics = $0 { true } else { false } }).count == 10)
        #expect(harness.broker.workDone - before <= 4, "two requests and their walks of 10 topics: \(harness.broker.workDone - before)")
        // A pattern that starts with a wildcard still walks them all, and finds what it should.
        client.send("TOPICS *.host3\n")
        #expect(TopicsPagesTests.names(try client.received()) == ["backup.host3"])
    }

    @Test("topics forgotten and made again stay findable by pattern, in every group, as a full walk finds them")
    func forgetting() throws {
        var configuration = BrokerConfiguration.default
        configuration.maxTopics = 500
        let harness = BrokerHarness(configuration: configuration)
        let client = harness.connect()
        var random = SeededRandom(seed: 14)
        var published: [String] = []
        for _ in 0..<3_000 {
            let name = ["a", "b", "c"].randomElement(using: &random)! + ".\(Int.random(in: 0..<2_000, using: &random))"
            let retain = Int.random(in: 0..<4, using: &random) == 0
            client.send("PUB \(name) 1\(retain ? "" : " noretain")\nx\n")
            published.append(name)
        }
        _ = try client.received()
        client.send("TOPICS\n")
        let all = TopicsPagesTests.names(try client.received())
        #expect(all.count == 500, "the table is full, and forgot the rest")
        for group in ["a", "b", "c"] {
            client.send("TOPICS \(group).>\n")
            #expect(TopicsPagesTests.names(try client.received()) == all.filter { $0.hasPrefix(group + ".") })
        }
    }
}
