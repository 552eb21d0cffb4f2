import Foundation
import NIOCore
import Testing

@testable import NotifyBus
@testable import NotifyBroker
@testable import NotifyProtocol

/// A topic's history survives a restart and a crash, as its buffered message does (broker and state log, no socket).
@Suite("History on disk (broker, no socket)", .timeLimit(.minutes(3)))
struct HistoryPersistenceTests {
    typealias Directory = StateLogTests.Directory

    /// A broker on the state log in `directory`, as a daemon starting there would have.
    static func start(in directory: Directory, _ configuration: BrokerConfiguration = ResumeTests.withHistory) throws -> BrokerHarness {
        let harness = BrokerHarness(configuration: configuration)
        let (log, contents) = try StateLog.open(directory: directory.path)
        #expect(contents.problems.isEmpty, "\(contents.problems)")
        harness.broker.attach(log, restoring: contents)
        return harness
    }

    @Test("after a clean restart a subscriber resumes where it was, and numbers go on exactly")
    func cleanRestart() throws {
        let directory = Directory()
        do {
            let harness = try Self.start(in: directory)
            ResumeTests.publish(10, to: "t", from: harness.connect())
            try harness.broker.saveState()
        }
        let harness = try Self.start(in: directory)
        let client = harness.connect()
        client.send("#1 SUB t since=4\n#2 PUB t 1 ack noretain\nx\n")
        #expect(ResumeTests.summary(try client.received()) == (5...10).map { "LAST#1 t \($0)" } + ["OK#1", "MSG t 11", "OK#2"])
    }

    @Test("after a crash, what was acknowledged is there to resume from, and numbers go on with no gap to announce")
    func crash() throws {
        let directory = Directory()
        do {
            let harness = try Self.start(in: directory)
            let client = harness.connect()
            client.send((1...10).map { "#\($0) PUB t 1 ack noretain\n\($0 % 10)\n" }.joined())
            #expect(try client.received().count == 10)
            // No saveState: the process dies here.
        }
        let harness = try Self.start(in: directory)
        let client = harness.connect()
        client.send("#1 SUB t since=7\n#2 PUB t 1 ack noretain\nx\n")
        #expect(ResumeTests.summary(try client.received()) == (8...10).map { "LAST#1 t \($0)" } + ["OK#1", "MSG t 11", "OK#2"])
    }

    @Test("a burst that runs through a history in one batch logs what the history holds at its end, and a crash loses none of it")
    func burstLogsWhatIsHeld() throws {
        let directory = Directory()
        do {
            let harness = try Self.start(in: directory)
            let client = harness.connect()
            ResumeTests.publish(10, to: "t", from: client)
            ResumeTests.publish(1_000, to: "t", from: client)
            // No saveState: the process dies here.
        }
        let (log, contents) = try StateLog.open(directory: directory.path)
        var decoder = ServerFrameDecoder()
        let logged = try contents.topics["t"]!.history.map { frame -> UInt64 in
            var input = frame
            guard case .delivery(let delivery)? = try decoder.decode(buffer: &input) else { return 0 }
            return delivery.sequence
        }
        #expect(logged == Array(1...10) + Array(947...1_010), "each batch logged what the history held at its end, and only that")
        let harness = BrokerHarness(configuration: ResumeTests.withHistory)
        harness.broker.attach(log, restoring: contents)
        #expect(HistoryBudgetTests.kept(harness, "t") == Array(947...1_010))
        let client = harness.connect()
        client.send("#1 SUB t since=5\n#2 PUB t 1 ack noretain\nx\n")
        let summary = ResumeTests.summary(try client.received())
        #expect(summary == ["DROP#1 t 941 6-946"] + (947...1_010).map { "LAST#1 t \($0)" } + ["OK#1", "MSG t 1011", "OK#2"])
    }

    @Test("a restart applies the limits in force: a smaller history keeps the newest, counted against the budgets")
    func smallerAfterRestart() throws {
        let directory = Directory()
        do {
            let harness = try Self.start(in: directory)
            ResumeTests.publish(50, to: "t", from: harness.connect())
            try harness.broker.saveState()
        }
        var configuration = BrokerConfiguration.default
        configuration.history = HistoryLimits(messages: 5, bytes: 1 << 20)
        let harness = try Self.start(in: directory, configuration)
        #expect(HistoryBudgetTests.kept(harness, "t") == Array(46...50))
        #expect(harness.broker.statistics.historyMessages == 5 && harness.broker.statistics.historyBytes == 5)
        let client = harness.connect()
        client.send("#1 SUB t since=40\n")
        #expect(ResumeTests.summary(try client.received()) == ["DROP#1 t 5 41-45"] + (46...50).map { "LAST#1 t \($0)" } + ["OK#1"])
    }

    @Test("a log whose history goes back (a topic forgotten and numbered again) restores only the newest run, without a crash")
    func brokenRunInTheLog() throws {
        let directory = Directory()
        let old = (500...503).map { StateRecord.history(frame: StateLogTests.frame("t", $0, "old")) }
        let new = (1...3).map { StateRecord.history(frame: StateLogTests.frame("t", $0, "new")) }
        try StateLogRecoveryTests.write(old + new, to: directory)
        let harness = try Self.start(in: directory)
        #expect(HistoryBudgetTests.kept(harness, "t") == [1, 2, 3])
        let client = harness.connect()
        ResumeTests.publish(70, to: "t", from: client)
        _ = try client.received()
        client.send("#1 SUB t since=1970-01-01T00:00:00Z\n")
        let summary = ResumeTests.summary(try client.received())
        // Numbers go on above the highest the log knew (504…), never back: what the history cannot replay is
        // announced, the old run's four messages included, but not the numbers between, which were never messages:
        // 1…3 and 504…509 let go of, 500…503 not put back, 13 in all.
        #expect(summary.first == "DROP#1 t 13 497-509", "\(summary.prefix(2))")
        #expect(summary.dropFirst().first == "LAST#1 t 510" && summary.count == 1 + 64 + 1 && summary.last == "OK#1")
    }
}
