import Foundation
import NIOCore
import Testing

@testable import NotifyBus
@testable import NotifyBroker
@testable import NotifyProtocol

/// A retained message on a topic with history is one stored form: a mark on its history's record from the publish
/// on (no block made, none dropped when the batch settles), written to the state log once, and read back as that
/// record (broker and state log, no socket).
@Suite("A retained message stored once (broker, no socket)", .timeLimit(.minutes(3)))
struct RetainedOnceTests {
    typealias Directory = StateLogTests.Directory

    static func configuration(historyMessages: Int, historyBytes: Int = 1 << 20) -> BrokerConfiguration {
        var configuration = BrokerConfiguration.default
        configuration.history = HistoryLimits(messages: historyMessages, bytes: historyBytes)
        return configuration
    }

    @Test("a retained publish to a topic with history copies nothing: until its batch settles it is a mark on the batch's record, then on the history's")
    func markFromThePublishOn() throws {
        let harness = BrokerHarness(configuration: Self.configuration(historyMessages: 64))
        let publisher = harness.connect()
        publisher.handle("PUB t 5\nfirst\nPUB t 6\nsecond\n")
        let state = try #require(harness.broker.topicTable["t"])
        #expect(state.retainedBlock == nil, "no block made at the publish")
        #expect(state.pendingRetained != nil && state.hasRetained)
        harness.broker.flush()
        #expect(state.pendingRetained == nil)
        #expect(state.retainedBlock == nil && state.retainedInHistory == 2)
        #expect(try SharedRetainedMessageTests.latest("t", in: harness)! == ("second", 2))
        #expect(harness.broker.connections.accounts[1000]?.retainedBytes == 6 && harness.broker.connections.accounts[1000]?.retainedTopics == 1)
        #expect(harness.broker.statistics.retainedBytes == 6)
    }

    @Test("a LATEST in the batch of the publish reads the message still waiting there")
    func latestInTheSameBatch() throws {
        let harness = BrokerHarness(configuration: Self.configuration(historyMessages: 64))
        let client = harness.connect()
        client.send("PUB t 5\nfirst\n#1 LATEST t\n")
        let frames = try client.received()
        guard case .latest(1, let last)? = frames.first else {
            Issue.record("no LAST: \(frames)")
            return
        }
        #expect(last.text == "first" && last.sequence == 1)
    }

    @Test("a retained message its history does not keep (over its bytes, or pushed out within the batch) gets a block of its own as the batch settles")
    func notKeptGetsABlock() throws {
        // Over the history's byte limit: skipped by it.
        let small = BrokerHarness(configuration: Self.configuration(historyMessages: 64, historyBytes: 8))
        small.connect().send("PUB big 20\n01234567890123456789\n")
        let big = try #require(small.broker.topicTable["big"])
        #expect(big.retainedInHistory == 0 && big.retainedBlock?.sequence == 1)
        #expect(try SharedRetainedMessageTests.latest("big", in: small)! == ("01234567890123456789", 1))

        // Pushed out of a history of one by the batch's later messages, never taken in at all.
        let one = BrokerHarness(configuration: Self.configuration(historyMessages: 1))
        one.connect().send("PUB t 4\nkeep\nPUB t 1 noretain\nx\nPUB t 1 noretain\ny\n")
        let state = try #require(one.broker.topicTable["t"])
        #expect(state.history?.oldestSequence == 3)
        #expect(state.retainedInHistory == 0 && state.retainedBlock?.sequence == 1)
        #expect(try SharedRetainedMessageTests.latest("t", in: one)! == ("keep", 1))
        #expect(one.broker.connections.accounts[1000]?.retainedBytes == 4 && one.broker.statistics.retainedBytes == 4)
    }

    @Test("a topic retained again and again in one batch, by several users: the counts are those of the last message")
    func replacedWithinABatch() throws {
        let harness = BrokerHarness(configuration: Self.configuration(historyMessages: 64))
        let first = harness.connect(uid: 1001)
        let second = harness.connect(uid: 1002)
        first.handle("PUB t 3\none\n")
        second.handle("PUB t 5\ntwo22\n")
        first.handle("PUB t 7\nthree33\nPUB t 4\nfour\n")
        second.handle("PUB t 2\nfi\n")
        harness.broker.flush()
        #expect(harness.broker.connections.accounts[1002]?.retainedBytes == 2 && harness.broker.connections.accounts[1002]?.retainedTopics == 1)
        #expect((harness.broker.connections.accounts[1001]?.retainedTopics ?? 0) == 0 && (harness.broker.connections.accounts[1001]?.retainedBytes ?? 0) == 0)
        #expect(harness.broker.statistics.retainedBytes == 2)
        #expect(harness.broker.topicTable["t"]?.retainedInHistory == 5)
        #expect(try SharedRetainedMessageTests.latest("t", in: harness)! == ("fi", 5))
    }

    @Test("a publisher at its limit of topics republishing within a batch is let through without settling the batch: the message it replaces is read where it waits")
    func atTheLimitWithinABatch() throws {
        var configuration = Self.configuration(historyMessages: 64)
        configuration.maxRetainedTopicsPerUser = 1
        let harness = BrokerHarness(configuration: configuration)
        let publisher = harness.connect()
        publisher.handle("PUB t 3\none\nPUB t 3\ntwo\nPUB t 5\nthree\n")
        #expect(harness.broker.pendingHistory.messages.count == 3, "no settling at each publish near the limit")
        publisher.handle("PUB u 1\nx\n")
        harness.broker.flush()
        #expect(try SharedRetainedMessageTests.latest("t", in: harness)! == ("three", 3))
        #expect(try SharedRetainedMessageTests.latest("u", in: harness) == nil, "over the limit of one topic")
        #expect(harness.broker.connections.accounts[1000]?.retainedTopics == 1 && harness.broker.connections.accounts[1000]?.retainedBytes == 5)
    }

    @Test("a log written before marks (the message as a history record and again as a buffered one) is held once after a restart")
    func logFromBeforeMarks() throws {
        let directory = Directory()
        let frame = StateLogTests.frame("t", 1, "keep")
        try StateLogRecoveryTests.write([.history(frame: frame), .retained(frame: frame), .sequence(topic: "t", 1)], to: directory)
        let harness = try HistoryPersistenceTests.start(in: directory, Self.configuration(historyMessages: 64))
        let state = try #require(harness.broker.topicTable["t"])
        #expect(state.retainedBlock == nil && state.retainedInHistory == 1)
        #expect(try SharedRetainedMessageTests.latest("t", in: harness)! == ("keep", 1))

        // The same number with other bytes (a log read after damage) is not taken for the same message.
        let other = Directory()
        try StateLogRecoveryTests.write(
            [.history(frame: frame), .retained(frame: StateLogTests.frame("t", 1, "else")), .sequence(topic: "t", 1)],
            to: other
        )
        let restarted = try HistoryPersistenceTests.start(in: other, Self.configuration(historyMessages: 64))
        let kept = try #require(restarted.broker.topicTable["t"])
        #expect(kept.retainedInHistory == 0 && kept.retainedBlock?.sequence == 1)
        #expect(try SharedRetainedMessageTests.latest("t", in: restarted)! == ("else", 1))
    }

    /// The kinds of the records in the state log of `directory`, in order (up to the zeros an open log's tail
    /// prepares ahead).
    static func recordKinds(in directory: Directory) throws -> [UInt8] {
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: directory.logPath)).prefix(directory.logLength))
        var offset = StateLog.header.count + 16
        var kinds: [UInt8] = []
        while offset + 18 <= bytes.count {
            #expect(bytes[offset] == StateRecord.marker)
            kinds.append(bytes[offset + 1])
            let length = Int(bytes[offset + 2]) | Int(bytes[offset + 3]) << 8 | Int(bytes[offset + 4]) << 16 | Int(bytes[offset + 5]) << 24
            offset += 18 + length
        }
        #expect(offset == bytes.count, "the log ends with a whole record")
        return kinds
    }

    @Test("with history, the log holds a buffered message once: its history record and a mark, both as it goes and compacted; a restart reads it back as that record")
    func loggedOnce() throws {
        let directory = Directory()
        let configuration = Self.configuration(historyMessages: 64)
        do {
            let harness = try HistoryPersistenceTests.start(in: directory, configuration)
            harness.connect().send("PUB t 4\nkeep\n")
            let written = try Self.recordKinds(in: directory)
            #expect(written.filter { $0 == StateRecord.historyKind }.count == 1)
            #expect(written.filter { $0 == StateRecord.retainedKind }.isEmpty, "no second copy: \(written)")
            #expect(written.filter { $0 == StateRecord.retainedInHistory(topic: "t", sequence: 1).kind }.count == 1)
            try harness.broker.saveState()
            let compacted = try Self.recordKinds(in: directory)
            #expect(compacted == [StateRecord.historyKind, StateRecord.retainedInHistory(topic: "t", sequence: 1).kind, 2])
        }
        let harness = try HistoryPersistenceTests.start(in: directory, configuration)
        let state = try #require(harness.broker.topicTable["t"])
        #expect(state.retainedBlock == nil && state.retainedInHistory == 1)
        #expect(try SharedRetainedMessageTests.latest("t", in: harness)! == ("keep", 1))
        #expect(harness.broker.connections.accounts[1000]?.retainedBytes == 4 && harness.broker.statistics.retainedBytes == 4)
    }

    @Test("restarted with history turned off, or a smaller history that no longer holds it, a buffered message the log marked on its history record is a block again")
    func restartedWithoutTheRecord() throws {
        let directory = Directory()
        do {
            let harness = try HistoryPersistenceTests.start(in: directory, Self.configuration(historyMessages: 64))
            harness.connect().send("PUB t 4\nkeep\nPUB t 1 noretain\nx\n")
            // Crash: no saveState, the live log's records are what a restart reads.
        }
        for messages in [0, 1] {
            let harness = try HistoryPersistenceTests.start(in: directory, Self.configuration(historyMessages: messages))
            let state = try #require(harness.broker.topicTable["t"])
            #expect(state.retainedInHistory == 0 && state.retainedBlock?.sequence == 1, "history of \(messages)")
            #expect(try SharedRetainedMessageTests.latest("t", in: harness)! == ("keep", 1), "history of \(messages)")
            #expect(harness.broker.connections.accounts[1000]?.retainedBytes == 4, "history of \(messages)")
        }
    }

    @Test("the log reader: a mark names the newest history record so numbered before it; one naming a record the log does not hold is reported and skipped; a clear undoes it")
    func readingMarks() throws {
        let renumbered = Directory()
        try StateLogRecoveryTests.write(
            [
                .history(frame: StateLogTests.frame("t", 1, "old")),
                .history(frame: StateLogTests.frame("t", 1, "new")),
                .retainedInHistory(topic: "t", sequence: 1),
                .history(frame: StateLogTests.frame("t", 2, "later")),
            ],
            to: renumbered
        )
        let (_, contents) = try StateLog.open(directory: renumbered.path)
        #expect(contents.problems.isEmpty, "\(contents.problems)")
        #expect(StateLogTests.payload(contents.topics["t"]) == "new")
        #expect(contents.topics["t"]?.retainedInHistory == 1)

        let missing = Directory()
        try StateLogRecoveryTests.write([.history(frame: StateLogTests.frame("t", 1, "one")), .retainedInHistory(topic: "t", sequence: 2)], to: missing)
        let (_, without) = try StateLog.open(directory: missing.path)
        #expect(without.topics["t"]?.retainedFrame == nil)
        #expect(without.problems.contains { $0.contains("its message 2, which the log does not hold") }, "\(without.problems)")

        let cleared = Directory()
        try StateLogRecoveryTests.write(
            [.history(frame: StateLogTests.frame("t", 1, "one")), .retainedInHistory(topic: "t", sequence: 1), .cleared(topic: "t")],
            to: cleared
        )
        let (_, clearedContents) = try StateLog.open(directory: cleared.path)
        #expect(clearedContents.topics["t"]?.retainedFrame == nil && clearedContents.topics["t"]?.retainedInHistory == nil)
    }

    @Test("a record's kind and body read back as written, a short one as damage")
    func recordRoundTrip() throws {
        var buffer = ByteBuffer()
        let record = StateRecord.retainedInHistory(topic: "backup.status", sequence: 42)
        record.write(to: &buffer, sealedWith: StateLogRecoveryTests.key)
        guard case .record(let read, let size) = StateRecord.read(buffer, at: 0, maxBodySize: 1 << 20, format: .sealed(StateLogRecoveryTests.key)) else {
            Issue.record("not read back")
            return
        }
        #expect(read == record && size == buffer.readableBytes)

        var short = ByteBuffer()
        StateRecord.write(kind: record.kind, body: UnsafeRawBufferPointer(start: nil, count: 0), to: &short, sealedWith: StateLogRecoveryTests.key)
        guard case .damaged(let why, _) = StateRecord.read(short, at: 0, maxBodySize: 1 << 20, format: .sealed(StateLogRecoveryTests.key)) else {
            Issue.record("a record with no body read as intact")
            return
        }
        #expect(why.contains("retained-history"))
    }
}
