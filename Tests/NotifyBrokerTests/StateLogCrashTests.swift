import Foundation
import Synchronization
import NIOCore
import Testing

@testable import NotifyBus
@testable import NotifyBroker
@testable import NotifyProtocol

/// The README's promises for rewrites of the log (recovery from damage, compaction): the new log is synced before it
/// replaces the old one, the damaged one is kept under a name of its own first, so a crash at any step loses
/// neither; and a rename or creation is followed by a sync of the directory whose failure is an error.
///
/// A crash is played by a ``RewriteProbe`` that throws after a step: nothing after it reaches the disk, the log's
/// descriptors close (its lock is let go) as a dying process's would, and the next ``StateLog/open`` sees the files
/// as the crash left them. A probe sees steps, not system calls: that the `fsync`s are made is checked on the real
/// daemon under `strace` (`RewriteSyncTraceTests`).
@Suite("State log under a crash or a failed sync", .timeLimit(.minutes(3)))
struct StateLogCrashTests {
    typealias Directory = StateLogTests.Directory

    struct Crash: Error {}

    /// A probe that notes each step and throws ``Crash`` after `step`.
    static func crashing(after step: RewriteProbe.Step?, noting steps: Steps? = nil) -> RewriteProbe {
        RewriteProbe(onStep: { passed in
            steps?.append(passed)
            if passed == step { throw Crash() }
        })
    }

    final class Steps: Sendable {
        private let list = Mutex<[RewriteProbe.Step]>([])
        func append(_ step: RewriteProbe.Step) { list.withLock { $0.append(step) } }
        var all: [RewriteProbe.Step] { list.withLock { $0 } }
    }

    /// A sealed log of three topics with damage between the second and the third: what recovery must keep.
    static func damagedLog(in directory: Directory) throws -> Data {
        var bytes = StateLog.fileHeader(StateLogRecoveryTests.key)
        let key = StateLogRecoveryTests.key
        StateRecord.retained(frame: StateLogTests.frame("one", 1, "first")).write(to: &bytes, sealedWith: key)
        StateRecord.retained(frame: StateLogTests.frame("two", 2, "second")).write(to: &bytes, sealedWith: key)
        bytes.writeBytes([UInt8](repeating: 0xFF, count: 15) + [UInt8](repeating: 0x41, count: 64))
        StateRecord.retained(frame: StateLogTests.frame("three", 3, "third")).write(to: &bytes, sealedWith: key)
        try StateLogRecoveryTests.write(bytes, to: directory)
        return Data(bytes.readableBytesView)
    }

    static func expectAllThree(_ contents: StateLog.Contents, _ comment: Comment) {
        #expect(StateLogTests.payload(contents.topics["one"]) == "first", comment)
        #expect(StateLogTests.payload(contents.topics["two"]) == "second", comment)
        #expect(StateLogTests.payload(contents.topics["three"]) == "third", comment)
    }

    /// The damaged copies kept aside in `directory`, each as its bytes.
    static func keptAside(in directory: Directory) throws -> [Data] {
        try directory.files.filter { $0.hasPrefix("state.log.damaged-") }.map {
            try Data(contentsOf: URL(fileURLWithPath: directory.path + "/" + $0))
        }
    }

    @Test("recovery takes its steps in order: the recovered log synced, the damaged one kept aside and synced, then the rename, then the directory's sync")
    func recoveryOrder() throws {
        let directory = Directory()
        let damaged = try Self.damagedLog(in: directory)
        let steps = Steps()
        let contents = try StateLog.$probe.withValue(Self.crashing(after: nil, noting: steps)) {
            try StateLog.open(directory: directory.path).1
        }
        #expect(steps.all == [.temporarySynced, .keptAside, .replaced, .directorySynced])
        Self.expectAllThree(contents, "recovered")
        #expect(try Self.keptAside(in: directory) == [damaged])
    }

    @Test("a crash after any step of recovery loses neither the damaged log nor what could be read from it", arguments: [
        RewriteProbe.Step.temporarySynced, .keptAside, .replaced, .directorySynced,
    ])
    func crashDuringRecovery(after step: RewriteProbe.Step) throws {
        let directory = Directory()
        let damaged = try Self.damagedLog(in: directory)
        #expect(throws: Crash.self) {
            try StateLog.$probe.withValue(Self.crashing(after: step)) { _ = try StateLog.open(directory: directory.path) }
        }
        // As the crash left it: the damaged log whole, in place or aside; never neither.
        let inPlace = try Data(contentsOf: URL(fileURLWithPath: directory.logPath))
        let aside = try Self.keptAside(in: directory)
        let replaced = step == .replaced || step == .directorySynced
        #expect(replaced ? aside == [damaged] : inPlace == damaged, "after \(step)")
        #expect(step == .temporarySynced ? aside.isEmpty : aside == [damaged], "after \(step)")

        // The next start.
        let (_, contents) = try StateLog.open(directory: directory.path)
        Self.expectAllThree(contents, "after a crash after \(step)")
        #expect(contents.problems.isEmpty == replaced, "a log not yet replaced is recovered again: \(contents.problems)")
        #expect(!directory.files.contains("state.log.tmp"))
        let kept = try Self.keptAside(in: directory)
        #expect(!kept.isEmpty && kept.allSatisfy { $0 == damaged }, "every copy kept aside is the damaged log, whole")
    }

    @Test("a crash after any step of a compaction leaves one complete log: the old one before the rename, the new one after", arguments: [
        RewriteProbe.Step.temporarySynced, .replaced, .directorySynced,
    ])
    func crashDuringCompaction(after step: RewriteProbe.Step) throws {
        let directory = Directory()
        do {
            let (log, _) = try StateLog.open(directory: directory.path)
            log.appendRetained(StateLogTests.frame("old", 1, "before"))
            log.appendSequence("old", 1)
            try log.commit()
            #expect(throws: Crash.self) {
                try StateLog.$probe.withValue(Self.crashing(after: step)) {
                    try log.compact([("new", StateLog.TopicRecord(sequence: 7, retainedFrame: StateLogTests.frame("new", 7, "after")))])
                }
            }
        }
        let (_, contents) = try StateLog.open(directory: directory.path)
        #expect(contents.problems.isEmpty, "\(contents.problems)")
        if step == .temporarySynced {
            #expect(StateLogTests.payload(contents.topics["old"]) == "before" && contents.topics["new"] == nil)
        } else {
            #expect(StateLogTests.payload(contents.topics["new"]) == "after" && contents.topics["old"] == nil)
            #expect(contents.topics["new"]?.sequence == 7)
        }
        #expect(!directory.files.contains("state.log.tmp"))
    }

    @Test("a directory sync that fails is an error: for a compaction, for a new log, and for a recovery")
    func failedDirectorySync() throws {
        let failing = RewriteProbe(directorySyncError: EIO)
        let directory = Directory()
        do {
            let (log, _) = try StateLog.open(directory: directory.path)
            let error = #expect(throws: StateLogError.self) {
                try StateLog.$probe.withValue(failing) { try log.compact([]) }
            }
            #expect(error?.description == "cannot sync the directory \(directory.path): Input/output error")
        }
        let fresh = Directory()
        #expect(throws: StateLogError.self, "a new log's creation is synced") {
            try StateLog.$probe.withValue(failing) { _ = try StateLog.open(directory: fresh.path) }
        }
        let damaged = Directory()
        _ = try Self.damagedLog(in: damaged)
        #expect(throws: StateLogError.self, "keeping the damaged log aside is synced") {
            try StateLog.$probe.withValue(failing) { _ = try StateLog.open(directory: damaged.path) }
        }
    }

    @Test("through the broker: a compaction whose directory sync fails withdraws the batch's OK (ERR storage); once a rewrite succeeds, OK again")
    func failedDirectorySyncInTheBroker() throws {
        let directory = Directory()
        let harness = BrokerHarness()
        let (log, contents) = try StateLog.open(directory: directory.path)
        harness.broker.attach(log, restoring: contents)
        let publisher = harness.connect()
        // One topic published again and again: the log grows past the size where compaction starts, nearly all of
        // it dead, and the batch that crosses it compacts.
        let big = String(repeating: "x", count: 4_000)
        var answers: [ServerFrame] = []
        try StateLog.$probe.withValue(RewriteProbe(directorySyncError: EIO)) {
            for request in 1...5_000 where !publisher.transport.closed {
                publisher.send("#\(request) PUB hot \(big.utf8.count) ack\n\(big)\n")
                answers += try publisher.received()
            }
        }
        let refused = try #require(answers.firstIndex { errorCode($0) != nil }, "a compaction came, and failed")
        #expect(refused > 1_000, "once the log is past 16 MiB, not before: \(refused)")
        #expect(answers[refused...].map(errorCode) == [.storage], "no OK for what the directory may not hold: \(answers[refused...])")
        #expect(publisher.transport.closed)
        #expect(harness.broker.stateProblem?.contains("cannot sync the directory") == true, "\(harness.broker.stateProblem ?? "")")

        let again = harness.connect()
        harness.now += 1_000_000
        harness.broker.retrySavingState()
        #expect(harness.broker.stateProblem == nil)
        again.send("#1 PUB hot 1 ack\nb\n")
        let last = try again.received()
        #expect(last == [.ok(requestID: 1, value: UInt64(refused) + 2)], "\(last)")
    }
}
