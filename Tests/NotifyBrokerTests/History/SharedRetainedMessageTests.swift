import NIOCore
import Testing

@testable import NotifyBus
@testable import NotifyBroker
@testable import NotifyProtocol
import TestSupport

/// A topic with history holds its buffered message once: as its history's record while the history keeps it, in a
/// block of its own before and after (broker, no socket).
@Suite("Buffered message shared with the history (broker, no socket)", .timeLimit(.minutes(3)))
struct SharedRetainedMessageTests {
    static func latest(_ topic: String, in harness: BrokerHarness) throws -> (text: String?, sequence: UInt64)? {
        let reader = harness.connect(uid: 0)
        reader.send("#1 LATEST \(topic)\n")
        guard case .latest(1, let last)? = try reader.received().first else { return nil }
        return (last.text, last.sequence)
    }

    static func configuration(historyMessages: Int) -> BrokerConfiguration {
        var configuration = BrokerConfiguration.default
        configuration.history = HistoryLimits(messages: historyMessages, bytes: 1 << 20)
        return configuration
    }

    @Test("once its batch is in, a topic's one message is a record of its history and no block; LATEST, SUB … latest and TOPICS read it there")
    func sharedOnceSettled() throws {
        let harness = BrokerHarness(configuration: Self.configuration(historyMessages: 64))
        harness.connect().send("PUB t 5\nfirst\nPUB t 6\nsecond\n")
        let state = try #require(harness.broker.topicTable["t"])
        #expect(state.retainedBlock == nil, "held once, in the history")
        #expect(state.retainedInHistory == 2)
        #expect(state.history?.count == 2)
        #expect(try Self.latest("t", in: harness)! == ("second", 2))

        let subscriber = harness.connect()
        subscriber.send("#1 SUB t latest\n#2 TOPICS t\n")
        let frames = try subscriber.received()
        guard case .latest(1, let replayed)? = frames.first else {
            Issue.record("no LAST: \(frames)")
            return
        }
        #expect(replayed.text == "second" && replayed.sequence == 2)
        #expect(state.info.retainedBytes == 6)
        #expect(harness.broker.statistics.retainedBytes == 6)
        #expect(harness.broker.connections.accounts[1000]?.retainedBytes == 6 && harness.broker.connections.accounts[1000]?.retainedTopics == 1)
    }

    @Test("a message sent without retaining leaves the buffered one where it is, an older record of the history")
    func olderRecord() throws {
        let harness = BrokerHarness(configuration: Self.configuration(historyMessages: 64))
        let publisher = harness.connect()
        publisher.send("PUB t 4\nkeep\n")
        publisher.send("PUB t 4 noretain\nskip\nPUB t 4 noretain\nskip\n")
        let state = try #require(harness.broker.topicTable["t"])
        #expect(state.retainedBlock == nil && state.retainedInHistory == 1)
        #expect(try Self.latest("t", in: harness)! == ("keep", 1))
    }

    @Test("when the history lets the buffered message go (its limit, a reload that turns history off), it moves into a block first")
    func movesOutBeforeItGoes() throws {
        let harness = BrokerHarness(configuration: Self.configuration(historyMessages: 2))
        let publisher = harness.connect()
        publisher.send("PUB t 4\nkeep\n")
        #expect(harness.broker.topicTable["t"]?.retainedInHistory == 1)
        // Two more without retaining push it out of a history of two.
        publisher.send("PUB t 4 noretain\nnext\n")
        publisher.send("PUB t 4 noretain\nlast\n")
        let state = try #require(harness.broker.topicTable["t"])
        #expect(state.history?.oldestSequence == 2)
        #expect(state.retainedInHistory == 0)
        #expect(state.retainedBlock?.sequence == 1)
        #expect(try Self.latest("t", in: harness)! == ("keep", 1))

        // Retained again, it is shared again; then history is turned off by a reload.
        publisher.send("PUB t 5\nagain\n")
        #expect(state.retainedBlock == nil && state.retainedInHistory == 4)
        harness.broker.reconfigure(Self.configuration(historyMessages: 0))
        #expect(state.history == nil)
        #expect(state.retainedBlock?.sequence == 4 && state.retainedInHistory == 0)
        #expect(try Self.latest("t", in: harness)! == ("again", 4))
        #expect(harness.broker.connections.accounts[1000]?.retainedBytes == 5)
    }

    @Test("a publisher that leaves in the batch where another replaces its buffered message: the newer message stays buffered")
    func previousPublisherLeaves() throws {
        let harness = BrokerHarness(configuration: Self.configuration(historyMessages: 2))
        let first = harness.connect(uid: 1001)
        let second = harness.connect(uid: 1002)
        // One batch: the first publishes and goes; the second's message replaces it, and forgetting the first's
        // account, now empty, settles the batch's history (both messages) in the middle of that publish.
        first.handle("PUB t 5\nfirst\n")
        harness.broker.close(first.session)
        second.handle("PUB t 6\nsecond\n")
        harness.broker.flush()
        let state = try #require(harness.broker.topicTable["t"])
        #expect(state.history?.count == 2)
        #expect(state.retainedBlock == nil && state.retainedInHistory == 2, "held once, in the history")
        #expect(try Self.latest("t", in: harness)! == ("second", 2))
        // The first message leaves the history: the buffered message is still the second.
        second.send("PUB t 1 noretain\nx\n")
        #expect(try Self.latest("t", in: harness)! == ("second", 2))
        #expect(harness.broker.connections.accounts[1002]?.retainedTopics == 1 && harness.broker.connections.accounts[1002]?.retainedBytes == 6)
        #expect(harness.broker.connections.accounts[1001]?.retainedTopics ?? 0 == 0)
    }

    @Test("a history trimmed by its publisher's budget keeps the buffered message readable")
    func budgetTrim() throws {
        var configuration = Self.configuration(historyMessages: 64)
        configuration.maxRetainedBytesPerUser = 100
        let harness = BrokerHarness(configuration: configuration)
        let publisher = harness.connect()
        publisher.send("PUB a 10\n0123456789\n")
        #expect(harness.broker.topicTable["a"]?.retainedInHistory == 1)
        // 100 bytes of history elsewhere by the same uid: a's history, the oldest, leaves.
        publisher.send(String(repeating: "PUB b 10 noretain\n0123456789\n", count: 10))
        let state = try #require(harness.broker.topicTable["a"])
        #expect(state.history?.isEmpty ?? true)
        #expect(state.retainedBlock?.sequence == 1)
        #expect(try Self.latest("a", in: harness)! == ("0123456789", 1))
    }

    @Test("CLEAR lets the buffered message go and leaves the history as it was")
    func clear() throws {
        let harness = BrokerHarness(configuration: Self.configuration(historyMessages: 64))
        let publisher = harness.connect()
        publisher.send("PUB t 4\nkeep\n#1 CLEAR t\n")
        let state = try #require(harness.broker.topicTable["t"])
        #expect(!state.hasRetained)
        #expect(state.history?.count == 1)
        #expect(try Self.latest("t", in: harness) == nil)
        #expect(harness.broker.connections.accounts[1000]?.retainedTopics ?? 0 == 0)
    }

    @Test("after a restart the buffered message and its history's newest record are one copy again")
    func restart() throws {
        let directory = StateLogTests.Directory()
        let configuration = Self.configuration(historyMessages: 64)
        do {
            let harness = try HistoryPersistenceTests.start(in: directory, configuration)
            harness.connect().send("PUB t 4\nkeep\nPUB u 4\nlone\n")
            try harness.broker.saveState()
        }
        let harness = try HistoryPersistenceTests.start(in: directory, configuration)
        for (topic, text) in [("t", "keep"), ("u", "lone")] {
            let state = try #require(harness.broker.topicTable[topic])
            #expect(state.retainedBlock == nil && state.retainedInHistory == 1, "\(topic)")
            #expect(try Self.latest(topic, in: harness)! == (text, 1))
        }
    }

    /// Random publishes (retained or not, of several sizes), clears and reloads on a few topics with small
    /// histories, in batches: after each batch, every topic's buffered message is the model's, the counts per user
    /// and in total match it, and no topic holds its buffered message twice.
    @Test("randomized against a model: what LATEST answers, what is counted, one copy")
    func randomized() throws {
        let seed = SeededRandom.seed(default: 0x5EED_B10C)
        var random = SeededRandom(seed: seed)
        let harness = BrokerHarness(configuration: Self.configuration(historyMessages: 3))
        let publishers = [harness.connect(uid: 1000), harness.connect(uid: 1001)]
        let topics = ["a", "b", "c"]
        var latest: [String: (text: String, sequence: UInt64, uid: UInt32)] = [:]
        var sequences: [String: UInt64] = [:]
        var uids: Set<UInt32> = [1000, 1001]
        for step in 0..<400 {
            if Int.random(in: 0..<40, using: &random) == 0 {
                harness.broker.reconfigure(Self.configuration(historyMessages: Int.random(in: 0...4, using: &random)))
            }
            let publisher = publishers.randomElement(using: &random)!
            // Now and then a publisher that comes, publishes and leaves within the batch: its account may be
            // forgotten in the middle of the next publish to the topic, settling the batch there.
            if Int.random(in: 0..<4, using: &random) == 0 {
                let uid = UInt32(2_000 + step)
                let passing = harness.connect(uid: uid)
                let topic = topics.randomElement(using: &random)!
                let text = "passing \(step)"
                passing.handle("PUB \(topic) \(text.utf8.count)\n\(text)\n")
                harness.broker.close(passing.session)
                sequences[topic, default: 0] += 1
                latest[topic] = (text, sequences[topic]!, uid)
                uids.insert(uid)
            }
            var batch = ""
            for _ in 0..<Int.random(in: 1...6, using: &random) {
                let topic = topics.randomElement(using: &random)!
                if Int.random(in: 0..<8, using: &random) == 0 {
                    batch += "CLEAR \(topic)\n"
                    latest[topic] = nil
                    continue
                }
                let text = String(repeating: "x", count: Int.random(in: 0...300, using: &random)) + "\(step)"
                let retain = Bool.random(using: &random)
                batch += "PUB \(topic) \(text.utf8.count)\(retain ? "" : " noretain")\n\(text)\n"
                sequences[topic, default: 0] += 1
                if retain { latest[topic] = (text, sequences[topic]!, publisher.session.publisher.uid) }
            }
            publisher.send(batch)
            for topic in topics {
                let state = harness.broker.topicTable[topic]
                #expect(!(state?.retainedBlock != nil && state?.retainedInHistory != 0), "seed \(seed), step \(step): two copies")
                let answer = try Self.latest(topic, in: harness)
                #expect(answer?.text == latest[topic]?.text && answer?.sequence == latest[topic]?.sequence, "seed \(seed), step \(step), \(topic)")
            }
            for uid in uids {
                let held = latest.values.filter { $0.uid == uid }
                #expect((harness.broker.connections.accounts[uid]?.retainedBytes ?? 0) == held.reduce(0) { $0 + $1.text.utf8.count }, "seed \(seed), step \(step)")
                #expect((harness.broker.connections.accounts[uid]?.retainedTopics ?? 0) == held.count, "seed \(seed), step \(step)")
            }
            #expect(harness.broker.statistics.retainedBytes == UInt64(latest.values.reduce(0) { $0 + $1.text.utf8.count }))
        }
    }
}
