import Foundation
import NIOCore
import Testing

@testable import NotifyBroker
@testable import NotifyProtocol

/// `sync = always` with the `fsync` handed to a ``StateLogSyncer`` (the daemon's runs on a thread of its own): an
/// acknowledgement leaves only once a sync that began after its record was written has ended, and nothing else
/// waits for the disk. The syncer here ends each sync when the test says, after a real `fsync` of the descriptor.
@Suite("The state log's sync away from the broker's thread (group commit)", .timeLimit(.minutes(2)))
struct StateLogSyncerTests {
    final class ManualSyncer: StateLogSyncer {
        private(set) var waiting: [(descriptor: CInt, completion: (CInt?) -> Void)] = []
        var underWay: Int { waiting.count }

        func sync(_ descriptor: CInt, completion: @escaping (CInt?) -> Void) {
            waiting.append((descriptor, completion))
        }

        /// Ends the oldest sync: with `failure` (an errno), or after a real `fsync`.
        func end(failure: CInt? = nil) {
            let (descriptor, completion) = waiting.removeFirst()
            let result: CInt? = failure ?? (fsync(descriptor) == 0 ? nil : errno)
            close(descriptor)
            completion(result)
        }
    }

    struct Setup {
        let directory = StateLogTests.Directory()
        let harness = BrokerHarness()
        let syncer = ManualSyncer()
        let log: StateLog

        init() throws {
            let (log, contents) = try StateLog.open(directory: directory.path, syncPolicy: .always)
            self.log = log
            harness.broker.attach(log, restoring: contents)
            harness.broker.stateSyncer = syncer
        }

        /// A connection subscribed to `t.>`, and one to publish.
        func subscriberAndPublisher() throws -> (BrokerHarness.Client, BrokerHarness.Client) {
            let subscriber = harness.connect()
            subscriber.send("#1 SUB t.>\n")
            _ = try subscriber.received()
            return (subscriber, harness.connect())
        }
    }

    static func oks(_ frames: [ServerFrame]) -> [UInt64] {
        frames.compactMap { if case .ok(let id, _) = $0 { id } else { nil } }
    }

    @Test("an OK waits for its sync; meanwhile other connections' deliveries and replies are not held by it")
    func acknowledgementWaitsAloneForTheDisk() throws {
        let setup = try Setup()
        let (subscriber, publisher) = try setup.subscriberAndPublisher()

        publisher.send("#2 PUB t.a 1 ack\nx\n")
        #expect(try publisher.received().isEmpty, "no OK before the sync ended")
        #expect(try subscriber.deliveries() == ["x"], "the subscriber is not held by the publisher's sync")
        #expect(setup.syncer.underWay == 1)
        #expect(setup.log.syncs == 0)

        let other = setup.harness.connect()
        other.send("#7 PUB t.b 1 noretain\ny\n#8 PING\n")
        #expect(try subscriber.deliveries() == ["y"])
        #expect(try other.received().compactMap(\.requestID) == [8], "a connection that waits for no sync is answered at once")

        setup.syncer.end()
        #expect(Self.oks(try publisher.received()) == [2])
        #expect(setup.log.syncs == 1)
        #expect(setup.syncer.underWay == 1, "what the other connection wrote meanwhile is synced next, though nobody waits for it")
        setup.syncer.end()
        #expect(setup.syncer.underWay == 0)
        #expect(setup.log.syncs == 2)
    }

    @Test("acknowledgements written while a sync runs wait for the next one, which begins when it ends and covers them all; a connection waiting for one sends nothing more until it ends")
    func groupCommit() throws {
        let setup = try Setup()
        let first = setup.harness.connect()
        let second = setup.harness.connect()

        first.send("#1 PUB a 1 ack\nx\n")
        #expect(setup.syncer.underWay == 1)
        first.send("#2 PUB b 1 ack\ny\n")
        #expect(first.session.isHoldingBack, "#2 waits, unread, for #1's sync")
        second.send("#3 PUB c 1 ack\nz\n#4 PING\n")
        #expect(setup.syncer.underWay == 1, "one sync at a time")
        #expect(try first.received().isEmpty)
        #expect(try second.received().isEmpty, "a reply behind an OK waits with it: replies keep their order")

        setup.syncer.end()
        #expect(Self.oks(try first.received()) == [1], "the first sync covers #1 only: #3 was written after it began")
        #expect(!first.session.isHoldingBack, "#2 was carried out as #1's sync ended")
        #expect(try second.received().isEmpty)
        #expect(setup.syncer.underWay == 1, "the next sync began as the first ended")

        setup.syncer.end()
        #expect(Self.oks(try first.received()) == [2])
        #expect(try second.received().compactMap(\.requestID) == [3, 4])
        #expect(setup.log.syncs == 2, "three acknowledgements, two syncs")
    }

    @Test("a failed sync withdraws every waiting acknowledgement (ERR storage, connection closed); other connections go on")
    func failedSync() throws {
        let setup = try Setup()
        let (subscriber, publisher) = try setup.subscriberAndPublisher()
        publisher.send("#2 PUB t.a 1 ack\nx\n")
        _ = try subscriber.received()

        setup.syncer.end(failure: EIO)
        let frames = try publisher.received()
        #expect(Self.oks(frames).isEmpty, "no OK for what may not be on disk")
        #expect(frames.contains { errorCode($0) == .storage })
        #expect(publisher.transport.closed)
        #expect(setup.harness.broker.stateProblem?.contains("cannot sync") == true)

        setup.harness.connect().send("PUB t.b 1 noretain\ny\n")
        #expect(try subscriber.deliveries() == ["y"])
    }

    @Test("at shutdown, an OK waiting for a sync leaves after a sync there, before ERR unavailable")
    func shutdown() throws {
        let setup = try Setup()
        let publisher = setup.harness.connect()
        publisher.send("#1 PUB a 1 ack\nx\n")
        #expect(try publisher.received().isEmpty)

        setup.harness.broker.shutdown()
        let frames = try publisher.received()
        #expect(Self.oks(frames) == [1])
        #expect(frames.last.flatMap(errorCode) == .unavailable)
        #expect(setup.log.syncs == 1)
        setup.syncer.end()  // the thread's sync ends late: nothing more is sent
        #expect(try publisher.received().isEmpty)
    }

    @Test("a connection that goes away while its OK waits for a sync: what it published stands, and the sync's end sends nothing to it")
    func publisherLeavesDuringSync() throws {
        let setup = try Setup()
        let (subscriber, publisher) = try setup.subscriberAndPublisher()
        publisher.send("#2 PUB t.a 1 ack\nx\n")
        #expect(try subscriber.deliveries() == ["x"])
        setup.harness.broker.close(publisher.session)

        setup.syncer.end()
        #expect(try publisher.received().isEmpty)
        let reader = setup.harness.connect()
        reader.send("#3 LATEST t.a\n")
        let latest = try reader.received().compactMap { frame -> String? in if case .latest(_, let message) = frame { message.text } else { nil } }
        #expect(latest == ["x"], "the publish stands")
        #expect(setup.syncer.underWay == 0)
    }
}
