import NIOCore
import Testing

@testable import NotifyBus
@testable import NotifyBroker
@testable import NotifyProtocol

/// The fleet service's requests (protocol 5) as the broker carries them out, without sockets: only the fleet user
/// may make them; `FOLLOW` hands out this host's publishes and clears as `EXP` frames, never another host's; `IMPORT`
/// publishes another host's message after every check a claim meets; `FLEETSTATS` shows in `STATS`.
@Suite("The fleet service's link into the broker", .timeLimit(.minutes(3)))
struct FleetLinkTests {
    static let fleetUID: UInt32 = 998

    static func harness() -> BrokerHarness {
        var configuration = BrokerConfiguration.default
        configuration.fleetUID = fleetUID
        return BrokerHarness(configuration: configuration)
    }

    static func exports(_ frames: [ServerFrame]) -> [String] {
        frames.compactMap {
            guard case .export(let exported) = $0 else { return nil }
            let delivery = exported.delivery
            return "\(exported.kind) \(delivery.topic.name) \(delivery.sequence) \(delivery.publisher.uid) \(delivery.publisher.unit ?? "-") \(delivery.text ?? "")"
        }
    }

    @Test("another uid, or any uid with no fleet user set, is refused each fleet request, naming who may")
    func onlyTheFleetUser() throws {
        for harness in [Self.harness(), BrokerHarness()] {
            let stranger = harness.connect(uid: 1000)
            stranger.send("#1 FOLLOW >\n#2 MISSED 5\n#3 IMPORT retain a.b 1 1 0 0 alpha/- 1\nx\n#4 FLEETSTATS 12\nnats_fake 1\n\n")
            let replies = try stranger.received()
            #expect(replies.compactMap(errorCode) == Array(repeating: .notPermitted, count: 4))
            #expect(replies.map(\.requestID) == [1, 2, 3, 4])
            let publisher = harness.connect(uid: 1000)
            publisher.send("PUB a.b 1\ny\n")
            #expect(Self.exports(try stranger.received()).isEmpty, "nothing followed")
            stranger.send("STATS\n")
            guard case .stats(_, let stats)? = try stranger.received().first else {
                Issue.record("no STATS")
                return
            }
            #expect(stats["nats_fake"] == nil && (stats["nats_imported"] ?? 0) == 0)
        }
    }

    @Test("FOLLOW: this host's publishes and clears of the patterns go out as EXP, with their kind and provenance; $…, user.…, unreadable and imported ones never")
    func followsLocalPublishes() throws {
        var configuration = BrokerConfiguration.default
        configuration.fleetUID = Self.fleetUID
        configuration.accessPolicy = AccessPolicy(rules: [try AccessPolicyTests.rule("deny read secret.> user:65534", "secret")])
        let harness = BrokerHarness(configuration: configuration)
        let fleet = harness.connect(uid: Self.fleetUID)
        fleet.send("#1 FOLLOW fed.> secret.> user.>\n")
        #expect(try fleet.received() == [.ok(requestID: 1, value: nil)])
        let publisher = harness.connect(uid: 1000, pid: 4242, unit: "job.service")
        publisher.send("PUB fed.a 3\none\nPUB fed.a 3 noretain\ntwo\nPUB other.x 1\nx\nPUB secret.x 1\ns\nPUB user.1000.x 1\nu\nCLEAR fed.a\n")
        #expect(Self.exports(try fleet.received()) == ["retained fed.a 1 1000 job.service one", "notRetained fed.a 2 1000 job.service two", "clear fed.a 2 1000 job.service "])
        fleet.send("#2 IMPORT retain fed.b 9 \(harness.now) 1000 77 beta/backup.service 4\ndone\nPING\n")
        #expect(Self.exports(try fleet.received()).isEmpty, "another host's message never goes back out")
        fleet.send("STATS\n")
        guard case .stats(_, let stats)? = try fleet.received().first else {
            Issue.record("no STATS")
            return
        }
        #expect(stats["nats_not_exported"] == 1 && stats["fleet_linked"] == 1 && stats["nats_imported"] == 1)
        #expect(stats["messages_out"] == 0, "an export is not a delivery")
    }

    @Test("IMPORT: delivered with its origin, numbered as the origin numbered it; a repeat is skipped and counted; forged claims are refused with the topic and host")
    func importsWithChecks() throws {
        let harness = Self.harness()
        let subscriber = harness.connect()
        subscriber.send("SUB fed.>\n")
        _ = try subscriber.received()
        let fleet = harness.connect(uid: Self.fleetUID)
        let now = harness.now
        fleet.send("IMPORT retain fed.status 7 \(now) 1000 77 alpha/backup.service 4\ndone\nIMPORT retain fed.status 7 \(now) 1000 77 alpha/backup.service 4\ndone\n")
        let delivered = try subscriber.received().compactMap(delivery)
        #expect(delivered.map { "\($0.sequence) \($0.publisher.host ?? "-") \($0.publisher.unit ?? "-") \($0.text ?? "")" } == ["7 alpha backup.service done"])
        #expect(try fleet.received().isEmpty, "a repeat is no error")

        let future = now + 3_600_000_000
        let tooLarge = ImportedMessage.largestSequence + 1
        fleet.send("""
            #1 IMPORT retain fed.x 8 \(future) 0 1 alpha/- 1
            x
            #2 IMPORT retain fed.x \(tooLarge) \(now) 0 1 alpha/- 1
            x
            #3 IMPORT retain fed.x 9 \(now) 0 1 al*pha/- 1
            x
            #4 IMPORT retain $sys.x 9 \(now) 0 1 alpha/- 1
            x

            """)
        let errors = try fleet.received().compactMap { frame -> ProtocolError? in if case .error(let e) = frame { e } else { nil } }
        #expect(errors.map(\.requestID) == [1, 2, 3, 4])
        #expect(errors[0].message.hasPrefix("IMPORT of fed.x from alpha: its time is 359") && errors[0].message.contains("s ahead of this host's clock"))
        #expect(errors[1].message.contains("past the largest this host takes in"))
        #expect(errors[2].message.contains("not a host name"))
        #expect(try subscriber.received().compactMap(delivery).isEmpty)
        fleet.send("STATS\n")
        guard case .stats(_, let stats)? = try fleet.received().first else {
            Issue.record("no STATS")
            return
        }
        #expect(stats["nats_imported"] == 1 && stats["nats_import_repeats"] == 1 && stats["nats_import_refused"] == 4)
    }

    @Test("IMPORT clear clears the buffered message unless a newer one is here; a replayed message held already is a repeat")
    func clearsAndReplays() throws {
        let harness = Self.harness()
        let fleet = harness.connect(uid: Self.fleetUID)
        let reader = harness.connect()
        let then = harness.now
        fleet.send("IMPORT retain fed.c 3 \(then) 1000 77 alpha/- 3\nold\nIMPORT replay fed.c 3 \(then) 1000 77 alpha/- 3\nold\n")
        reader.send("LATEST fed.c\n")
        guard case .latest(_, let held)? = try reader.received().first else {
            Issue.record("no LAST")
            return
        }
        #expect(held.text == "old" && held.host == "alpha")
        fleet.send("IMPORT clear fed.c 3 \(harness.now) 1000 77 alpha/- 0\n\n")
        reader.send("LATEST fed.c\n")
        #expect(try reader.received().compactMap(errorCode) == [.notFound])
        fleet.send("STATS\n")
        guard case .stats(_, let stats)? = try fleet.received().first else {
            Issue.record("no STATS")
            return
        }
        #expect(stats["nats_import_repeats"] == 1 && stats["nats_clears_imported"] == 1)
    }

    @Test("after a restart, a message the broker holds from before (its origin and number) is a repeat; the next one, or another host's, is taken in")
    func repeatAfterRestart() throws {
        let harness = Self.harness()
        let fleet = harness.connect(uid: Self.fleetUID)
        let then = harness.now - 10_000_000
        for sequence in 1...5 {
            fleet.send("IMPORT retain fed.status \(sequence) \(then) 0 1 alpha/- 2\nm\(sequence)\n")
        }
        // What a restarted daemon knows of what it took in: only what its topics hold (its filter starts empty).
        harness.broker.fleet.filter = ImportFilter()
        fleet.send("IMPORT retain fed.status 5 \(then) 0 1 alpha/- 2\nm5\nIMPORT retain fed.status 6 \(then + 1) 0 1 alpha/- 2\nm6\n")
        fleet.send("IMPORT retain fed.status 2 \(then + 2) 0 1 gamma/- 2\ng2\nSTATS\n")
        guard case .stats(_, let stats)? = try fleet.received().last else {
            Issue.record("no STATS")
            return
        }
        #expect(stats["nats_imported"] == 7 && stats["nats_import_repeats"] == 1)
    }

    @Test("MISSED tells every subscriber of a drop; FLEETSTATS shows in STATS, never over the daemon's own names")
    func missedAndStats() throws {
        let harness = Self.harness()
        let subscriber = harness.connect()
        subscriber.send("SUB fed.>\n")
        _ = try subscriber.received()
        let fleet = harness.connect(uid: Self.fleetUID)
        fleet.send("#1 MISSED 36\n")
        #expect(try fleet.received() == [.ok(requestID: 1, value: nil)])
        #expect(try subscriber.received() == [.dropped(DropNotice(topic: DropNotice.manyTopics, count: 36, firstSequence: 0, lastSequence: 0, reason: .fleet))])
        let report = "nats_connected 1\nnats_exported 12\nconnections 999\nnats_imported 5\n"
        fleet.send("#2 FLEETSTATS \(report.utf8.count)\n\(report)\n")
        #expect(try fleet.received() == [.ok(requestID: 2, value: nil)])
        subscriber.send("STATS\n")
        guard case .stats(_, let stats)? = try subscriber.received().first else {
            Issue.record("no STATS")
            return
        }
        #expect(stats["nats_connected"] == 1 && stats["nats_exported"] == 12)
        #expect(stats["connections"] == 2 && stats["nats_imported"] == 0, "the daemon's own counters are not overridden")
        #expect(stats.counters.filter { $0.name == "connections" }.count == 1)
    }

    @Test("a follower that stops reading gets what fits its queue, then a DROP for the rest; publishers and subscribers go on")
    func followerThatNeverReads() throws {
        var configuration = BrokerConfiguration.default
        configuration.fleetUID = Self.fleetUID
        configuration.maxQueuedMessages = 10
        let harness = BrokerHarness(configuration: configuration)
        let fleet = harness.connect(uid: Self.fleetUID)
        fleet.send("FOLLOW >\n")
        _ = try fleet.received()
        fleet.transport.isWritable = false
        let subscriber = harness.connect()
        subscriber.send("SUB fed.>\n")
        _ = try subscriber.received()
        let publisher = harness.connect()
        for number in 100..<200 { publisher.send("PUB fed.n 3 noretain\n\(number)\n") }
        #expect(try subscriber.deliveries().count == 100, "the subscriber loses nothing")
        fleet.transport.isWritable = true
        harness.broker.writabilityChanged(fleet.session)
        harness.broker.flush()
        let frames = try fleet.received()
        let dropped = frames.compactMap { if case .dropped(let notice) = $0 { notice.count } else { nil } }.reduce(0, +)
        #expect(Self.exports(frames).count + Int(dropped) == 100 && Self.exports(frames).count <= 10)
    }
}
