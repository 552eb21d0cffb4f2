import NIOCore
import Testing

@testable import NotifyBus
@testable import NotifyBroker
@testable import NotifyProtocol
import TestSupport

/// What each topic's history keeps, and what it costs whom (broker, no socket).
@Suite("History limits and budgets (broker, no socket)", .timeLimit(.minutes(3)))
struct HistoryBudgetTests {
    static func kept(_ harness: BrokerHarness, _ topic: String) -> [UInt64] {
        var sequences: [UInt64] = []
        harness.broker.topicTable[topic]?.history?.forEach(last: nil, topic: topic) { entry, _ in sequences.append(entry.sequence) }
        return sequences
    }

    static func publish(_ count: Int, to topic: String, size: Int = 10, from client: BrokerHarness.Client) {
        let payload = String(repeating: "x", count: size)
        client.send(String(repeating: "PUB \(topic) \(size) noretain\n\(payload)\n", count: count))
    }

    @Test("a topic keeps its last N messages (64 by default); a rule by pattern keeps more, or none")
    func limitsByPattern() throws {
        #expect(BrokerConfiguration.default.history == .resumable && HistoryLimits.resumable == HistoryLimits(messages: 64, bytes: 64 << 10))
        var configuration = ResumeTests.withHistory
        configuration.historyRules = [
            HistoryRule(try TopicPattern("deep.>"), HistoryLimits(messages: 200, bytes: 1 << 20)),
            HistoryRule(try TopicPattern("none.>"), .off),
        ]
        let harness = BrokerHarness(configuration: configuration)
        let client = harness.connect()
        for topic in ["deep.a", "plain", "none.a"] { Self.publish(300, to: topic, from: client) }
        #expect(Self.kept(harness, "deep.a") == Array(101...300))
        #expect(Self.kept(harness, "plain") == Array(237...300))
        #expect(harness.broker.topicTable["none.a"]?.history == nil, "no history, not even an empty one")
        #expect(harness.broker.statistics.historyMessages == 264)
        #expect(harness.broker.statistics.historyBytes == 2_640)
    }

    @Test("a burst keeps as many messages as --history-bytes holds counted as kept, as messages one at a time do")
    func burstCountsBytesAsKept() throws {
        // What one message takes of the limit: its frame less the line start its record leaves out.
        let probe = BrokerHarness(configuration: ResumeTests.withHistory)
        Self.publish(1, to: "t", from: probe.connect())
        let one = try #require(probe.broker.topicTable["t"]?.history?.bytes)
        var configuration = ResumeTests.withHistory
        configuration.history = HistoryLimits(messages: 64, bytes: 3 * one)
        let burst = BrokerHarness(configuration: configuration)
        Self.publish(3, to: "t", from: burst.connect())
        #expect(Self.kept(burst, "t") == [1, 2, 3], "three in one batch")
        let apart = BrokerHarness(configuration: configuration)
        let client = apart.connect()
        for _ in 0..<3 { Self.publish(1, to: "t", from: client) }
        #expect(Self.kept(apart, "t") == [1, 2, 3], "three batches")
    }

    @Test("a uid's history stays within its budget: its own oldest leaves first, in whatever topic; others keep theirs")
    func perUser() throws {
        var configuration = ResumeTests.withHistory
        configuration.maxRetainedBytesPerUser = 5_000
        let harness = BrokerHarness(configuration: configuration)
        let mine = harness.connect(uid: 1000)
        let theirs = harness.connect(uid: 2000)
        Self.publish(20, to: "theirs", size: 100, from: theirs)
        Self.publish(30, to: "old", size: 100, from: mine)
        Self.publish(40, to: "new", size: 100, from: mine)
        #expect(Self.kept(harness, "old") == Array(21...30), "uid 1000's oldest history left first: 2,000 bytes of it")
        #expect(Self.kept(harness, "new") == Array(1...40))
        #expect(Self.kept(harness, "theirs") == Array(1...20), "uid 2000's history is not uid 1000's to spend")
        #expect(harness.broker.statistics.historyBytes == 2_000 + 5_000)
    }

    @Test("a history over its publisher's budget loses what the budget needs, one message at a time, not the whole topic")
    func perUserOneTopic() throws {
        var configuration = ResumeTests.withHistory
        configuration.maxRetainedBytesPerUser = 5_000
        let harness = BrokerHarness(configuration: configuration)
        Self.publish(60, to: "t", size: 100, from: harness.connect(uid: 1000))
        #expect(Self.kept(harness, "t") == Array(11...60))
        #expect(harness.broker.statistics.historyBytes == 5_000)
    }

    @Test("all histories together stay within the daemon's budget, the oldest leaving first")
    func total() throws {
        var configuration = ResumeTests.withHistory
        configuration.maxRetainedBytes = 3_000
        let harness = BrokerHarness(configuration: configuration)
        for uid in 1_000..<1_005 as Range<UInt32> {
            Self.publish(10, to: "t\(uid)", size: 100, from: harness.connect(uid: uid))
        }
        #expect(harness.broker.statistics.historyBytes == 3_000)
        #expect(Self.kept(harness, "t1000").isEmpty && Self.kept(harness, "t1001").isEmpty)
        #expect(Self.kept(harness, "t1004") == Array(1...10))
    }

    @Test("a message no budget can hold is skipped, and the history starts again after it")
    func oversized() throws {
        var configuration = BrokerConfiguration.default
        configuration.maxRetainedBytesPerUser = 1_000
        configuration.history = HistoryLimits(messages: 64, bytes: 1 << 20)
        let harness = BrokerHarness(configuration: configuration)
        let client = harness.connect()
        Self.publish(3, to: "t", size: 10, from: client)
        Self.publish(1, to: "t", size: 2_000, from: client)
        Self.publish(2, to: "t", size: 10, from: client)
        #expect(Self.kept(harness, "t") == [5, 6])
        #expect(harness.broker.topicTable["t"]?.history?.lastEvicted?.sequence == 4)
    }

    @Test("a topic forgotten to make room takes its history with it, and the counts follow")
    func forgottenTopics() throws {
        var configuration = ResumeTests.withHistory
        configuration.maxTopics = 10
        let harness = BrokerHarness(configuration: configuration)
        let client = harness.connect()
        for index in 0..<50 { Self.publish(5, to: "t\(index)", from: client) }
        #expect(harness.broker.statistics.topics == 10)
        #expect(harness.broker.statistics.historyMessages == 50)
        #expect(harness.broker.statistics.historyBytes == 500)
    }

    @Test("a reload applies new history limits and budgets to the histories kept, not only to what comes next")
    func reload() throws {
        var configuration = ResumeTests.withHistory
        configuration.historyRules = [HistoryRule(try TopicPattern("gone.>"), .resumable)]
        let harness = BrokerHarness(configuration: configuration)
        let client = harness.connect()
        Self.publish(30, to: "kept", size: 100, from: client)
        Self.publish(30, to: "gone.a", size: 100, from: client)
        configuration.history = HistoryLimits(messages: 10, bytes: 1 << 20)
        configuration.historyRules = [HistoryRule(try TopicPattern("gone.>"), .off)]
        harness.broker.reconfigure(configuration)
        #expect(Self.kept(harness, "kept") == Array(21...30))
        #expect(harness.broker.topicTable["gone.a"]?.history == nil)
        #expect(harness.broker.statistics.historyMessages == 10 && harness.broker.statistics.historyBytes == 1_000)
        configuration.maxRetainedBytesPerUser = 500
        harness.broker.reconfigure(configuration)
        #expect(Self.kept(harness, "kept") == Array(26...30), "the uid's new budget")
        #expect(harness.broker.statistics.historyBytes == 500)
    }

    @Test("randomized: while one uid's messages are all that is kept, its order stands for the daemon's, and evicts the same")
    func oneKeepersOrder() throws {
        let seed = SeededRandom.seed(default: 0x1ED6_E5)
        var random = SeededRandom(seed: seed)
        var configuration = ResumeTests.withHistory
        configuration.history = HistoryLimits(messages: 8, bytes: 1 << 20)
        // The daemon's budget below a uid's, so that it is the daemon's order that trims, now and then above.
        configuration.maxRetainedBytesPerUser = 3_000
        configuration.maxRetainedBytes = 2_500
        // The same script against a broker whose ledger keeps the daemon's order apart always, as it did before.
        let shared = BrokerHarness(configuration: configuration)
        let apart = BrokerHarness(configuration: configuration)
        apart.broker.historyLedger = HistoryLedger(sharesOneKeepersOrder: false)
        let uids: [UInt32] = [1000, 1001, 1002]
        var clients = [shared, apart].map { harness in uids.map { harness.connect(uid: $0) } }
        var sharedWhileAlone = 0
        let topics = ["a", "b", "c", "d", "e"]
        var sole = true
        for step in 0..<600 {
            // Long spells of one uid alone, then of several.
            if Int.random(in: 0..<50, using: &random) == 0 { sole.toggle() }
            let who = sole ? 0 : Int.random(in: 0..<uids.count, using: &random)
            var batch = ""
            for _ in 0..<Int.random(in: 1...5, using: &random) {
                let size = Int.random(in: 1...400, using: &random)
                batch += "PUB \(topics.randomElement(using: &random)!) \(size) noretain\n\(String(repeating: "x", count: size))\n"
            }
            if Int.random(in: 0..<60, using: &random) == 0 {
                configuration.maxRetainedBytes = Int.random(in: 1_500...8_000, using: &random)
                configuration.maxRetainedBytesPerUser = Int.random(in: 1_000...6_000, using: &random)
                shared.broker.reconfigure(configuration)
                apart.broker.reconfigure(configuration)
            }
            clients[0][who].send(batch)
            clients[1][who].send(batch)
            if Int.random(in: 0..<30, using: &random) == 0 {
                // A client that leaves and comes back: a new connection of the same uid.
                let uid = Int.random(in: 0..<uids.count, using: &random)
                for (side, harness) in [shared, apart].enumerated() {
                    harness.broker.close(clients[side][uid].session)
                    clients[side][uid] = harness.connect(uid: uids[uid])
                }
            }
            if Int.random(in: 0..<10, using: &random) == 0 {
                // Idle: the daemon's own order is let go if one uid's messages are all that is kept.
                shared.broker.releaseIdleMemory()
                apart.broker.releaseIdleMemory()
                let keptByOne = uids.contains { shared.broker.connections.accounts[$0]?.historyMessages == shared.broker.statistics.historyMessages }
                if keptByOne {
                    #expect(shared.broker.historyLedger.ownOrderCount == 0, "seed \(seed), step \(step): one uid's order stands for the daemon's")
                    sharedWhileAlone += 1
                }
            }
            for topic in topics {
                #expect(Self.kept(shared, topic) == Self.kept(apart, topic), "seed \(seed), step \(step), topic \(topic)")
            }
            #expect(shared.broker.statistics.historyBytes == apart.broker.statistics.historyBytes, "seed \(seed), step \(step)")
            #expect(shared.broker.statistics.historyBytes <= UInt64(configuration.maxRetainedBytes))
        }
        #expect(sharedWhileAlone > 5, "the script has spells where one uid's messages are all that is kept")
    }
}
