import NIOCore
import Testing

@testable import NotifyBroker
@testable import NotifyProtocol

/// What a batch owes the state log, without a broker: which topics are marked, what the batch's end writes, and
/// what a log that cannot be written is spared.
@Suite("State journal", .timeLimit(.minutes(1)))
struct StateJournalTests {
    static func topic(_ name: String, retaining payload: String?, sequence: UInt64) throws -> TopicState {
        let state = TopicState(topic: try Topic(name))
        state.sequence = sequence
        if let payload {
            let frame = StateLogTests.frame(name, sequence, payload)
            state.retainInBlock(frame.withUnsafeReadableBytes {
                RetainedMessage.make(frame: $0, payloadSize: payload.utf8.count, sequence: sequence, owner: UserAccount(uid: 1))
            })
        }
        return state
    }

    @Test("without a log nothing is marked; with one, a topic changed many times is marked once")
    func marks() throws {
        let state = try Self.topic("a", retaining: "x", sequence: 1)
        var journal = StateJournal()
        journal.markUnsaved(state)
        journal.markHistoryUnlogged(state, through: 1)
        #expect(journal.unsavedTopics.isEmpty && journal.unloggedHistories.isEmpty && !state.isUnsaved)

        let directory = StateLogTests.Directory()
        journal.log = try StateLog.open(directory: directory.path).0
        for _ in 0..<3 { journal.markUnsaved(state) }
        for sequence in 1...3 as ClosedRange<UInt64> { journal.markHistoryUnlogged(state, through: sequence) }
        #expect(journal.unsavedTopics.count == 1 && journal.unloggedHistories.count == 1)
        #expect(state.isUnsaved && state.historyIsUnlogged && state.persistedSequence == 3)
    }

    @Test("the batch's end writes each marked topic's final state once and clears the marks")
    func appendMarked() throws {
        let directory = StateLogTests.Directory()
        do {
            let (log, _) = try StateLog.open(directory: directory.path)
            var journal = StateJournal()
            journal.log = log
            let kept = try Self.topic("kept", retaining: "first", sequence: 1)
            let cleared = try Self.topic("cleared", retaining: "old", sequence: 4)
            journal.markUnsaved(kept)
            journal.markUnsaved(cleared)
            journal.appendMarked()
            kept.retainInBlock(StateLogTests.frame("kept", 2, "second").withUnsafeReadableBytes {
                RetainedMessage.make(frame: $0, payloadSize: 6, sequence: 2, owner: UserAccount(uid: 1))
            })
            kept.sequence = 2
            cleared.dropRetained()
            journal.markUnsaved(kept)
            journal.markUnsaved(cleared)
            journal.appendMarked()
            #expect(journal.unsavedTopics.isEmpty && !kept.isUnsaved && !cleared.isUnsaved)
            try log.commit()
        }
        let contents = try StateLog.open(directory: directory.path).1
        #expect(StateLogTests.payload(contents.topics["kept"]) == "second")
        #expect(contents.topics["cleared"]?.retainedFrame == nil && contents.topics["cleared"]?.sequence == 4)
    }

    @Test("while the log awaits a rewrite, histories are not noted (the rewrite writes them whole); buffered messages are")
    func awaitingRewrite() throws {
        let directory = StateLogTests.Directory()
        var journal = StateJournal()
        journal.log = try StateLog.open(directory: directory.path).0
        _ = journal.health.failed("disk full", now: 0)
        let state = try Self.topic("a", retaining: "x", sequence: 7)
        journal.markHistoryUnlogged(state, through: 7)
        journal.markUnsaved(state)
        #expect(journal.unloggedHistories.isEmpty && !state.historyIsUnlogged && state.persistedSequence == 0)
        #expect(journal.unsavedTopics.count == 1)
    }

    @Test("a compaction writes the exact state of every topic and drops the marks it made moot")
    func compaction() throws {
        let directory = StateLogTests.Directory()
        do {
            let (log, _) = try StateLog.open(directory: directory.path)
            var journal = StateJournal()
            journal.log = log
            var table = TopicTable(maxTopics: 10)
            let state = try Self.topic("a", retaining: "latest", sequence: 9)
            table.restore(state)
            journal.markUnsaved(state)
            try journal.compact(topics: table)
            #expect(journal.unsavedTopics.isEmpty && !state.isUnsaved && state.persistedSequence == 9)
        }
        let contents = try StateLog.open(directory: directory.path).1
        #expect(StateLogTests.payload(contents.topics["a"]) == "latest" && contents.topics["a"]?.sequence == 9)
    }
}
