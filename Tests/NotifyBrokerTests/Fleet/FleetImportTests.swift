import NIOCore
import Testing

@testable import NotifyBus
@testable import NotifyBroker
@testable import NotifyProtocol

/// What the broker offers a federation bridge, without sockets: local publishes handed out, other hosts' messages
/// taken in with their origin, never handed back out.
@Suite("Broker: other hosts' messages taken in", .timeLimit(.minutes(3)))
struct FleetImportTests {
    static let importerPeer = PeerCredentials(pid: 1, uid: 0, gid: 0)

    static func imported(_ topic: String, _ text: String, host: String = "alpha", sequence: UInt64, retain: Bool = true) throws -> ImportedMessage {
        ImportedMessage(
            topic: try Topic(topic),
            payload: ByteBuffer(string: text),
            retain: retain,
            host: host,
            publisher: Publisher(uid: 1000, pid: 77, unit: "backup.service"),
            sequence: sequence
        )
    }

    @Test("an imported message reaches local subscribers and LATEST with its origin host; a local publish goes on from its number")
    func importsWithOrigin() throws {
        let harness = BrokerHarness()
        let subscriber = harness.connect()
        subscriber.send("SUB fed.>\n")
        _ = try subscriber.received()
        let importer = harness.broker.openImporter(peer: Self.importerPeer)
        let outcome = harness.broker.publishImported(try Self.imported("fed.status", "done", sequence: 7), through: importer)
        harness.broker.flush()
        #expect(outcome == .published(sequence: 7), "the origin's number, past the topic's own here")
        let delivered = try #require(try subscriber.received().compactMap(delivery).first)
        #expect(delivered.host == "alpha" && delivered.publisher == Publisher(uid: 1000, pid: 77, unit: "backup.service", host: "alpha"))
        #expect(delivered.sequence == 7 && delivered.text == "done")

        subscriber.send("LATEST fed.status\n")
        guard case .latest(_, let latest)? = try subscriber.received().first else {
            Issue.record("no LAST frame")
            return
        }
        #expect(latest.host == "alpha" && latest.sequence == 7)

        // A local publish after it goes on from there; an import numbered behind the topic takes the next number.
        let local = harness.connect()
        local.send("PUB fed.status 5 ack\nlocal\n")
        #expect(try local.received().contains { if case .ok(_, 8?) = $0 { true } else { false } }, "numbered after the import's 7")
        #expect(harness.broker.publishImported(try Self.imported("fed.status", "late", sequence: 3), through: importer) == .published(sequence: 9))
        #expect(harness.broker.holdsAlready(try Self.imported("fed.status", "late", sequence: 3)))
        #expect(!harness.broker.holdsAlready(try Self.imported("fed.status", "late", host: "beta", sequence: 3)))
        #expect(!harness.broker.holdsAlready(try Self.imported("fed.status", "other", sequence: 3)))
    }

    @Test("an import the limits refuse says why, and nothing of it is kept")
    func refusedImport() throws {
        var configuration = BrokerConfiguration.default
        configuration.maxRetainedBytes = 4
        let harness = BrokerHarness(configuration: configuration)
        let importer = harness.broker.openImporter(peer: Self.importerPeer)
        let outcome = harness.broker.publishImported(try Self.imported("fed.big", "too large", sequence: 1), through: importer)
        guard case .refused(let error) = outcome else {
            Issue.record("accepted past the limit: \(outcome)")
            return
        }
        #expect(error.code == .limitReached)
        #expect(harness.broker.publishImported(try Self.imported("fed.small", "ok", sequence: 1), through: importer) == .published(sequence: 1))
        #expect(harness.broker.publishImported(try Self.imported("fed.big", "no", sequence: 2, retain: false), through: importer) == .published(sequence: 2))
    }

    /// The text of `topic`'s buffered message, as `LATEST` answers it to `client`; nil when it holds none.
    static func latest(_ topic: String, _ client: BrokerHarness.Client) throws -> String? {
        client.send("LATEST \(topic)\n")
        guard case .latest(_, let message)? = try client.received().first else { return nil }
        return message.text
    }

    @Test("another host's clear: NATS's order for its messages live, the times for this host's own and for a clear read back")
    func importedClears() throws {
        let harness = BrokerHarness()
        let client = harness.connect()
        let importer = harness.broker.openImporter(peer: Self.importerPeer)
        let topic = try Topic("fed.status")

        // Another host's message, then a clear that NATS delivered after it: cleared, whatever the clocks say.
        _ = harness.broker.publishImported(try Self.imported("fed.status", "theirs", sequence: 1), through: importer)
        #expect(harness.broker.clearImported(topic, at: 1, replayed: false, through: importer) == nil)
        #expect(try Self.latest("fed.status", client) == nil)

        // Read back from the stream, a clear older than a message taken in since leaves it.
        _ = harness.broker.publishImported(try Self.imported("fed.status", "newer", sequence: 2), through: importer)
        #expect(harness.broker.clearImported(topic, at: harness.now - 100, replayed: true, through: importer) == nil)
        #expect(try Self.latest("fed.status", client) == "newer")
        #expect(harness.broker.clearImported(topic, at: harness.now + 100, replayed: true, through: importer) == nil)
        #expect(try Self.latest("fed.status", client) == nil)

        // This host's own message: the times decide, live or not.
        client.send("PUB fed.status 4\nmine\n")
        let published = harness.now
        #expect(harness.broker.clearImported(topic, at: published - 1, replayed: false, through: importer) == nil)
        #expect(try Self.latest("fed.status", client) == "mine", "a clear from before it leaves it")
        #expect(harness.broker.clearImported(topic, at: published, replayed: false, through: importer) == nil)
        #expect(try Self.latest("fed.status", client) == nil, "a clear at or after it clears it")
    }

    @Test("another host's clear is refused where user nobody may not publish, as its messages are")
    func refusedClear() throws {
        var configuration = BrokerConfiguration.default
        let resolver = AccessRule.NameResolver(uid: { _ in nil }, gid: { _ in nil })
        configuration.accessPolicy = AccessPolicy(rules: [try AccessRule(parsing: "deny publish system.> user:65534", name: "no-imports", resolver: resolver)])
        let harness = BrokerHarness(configuration: configuration)
        let client = harness.connect(uid: 0)
        client.send("PUB system.state 2\nok\n")
        let importer = harness.broker.openImporter(peer: PeerCredentials(pid: 1, uid: 65534, gid: 65534))
        let refusal = harness.broker.clearImported(try Topic("system.state"), at: harness.now + 1, replayed: false, through: importer)
        #expect(refusal?.code == .notPermitted, "\(String(describing: refusal))")
        #expect(try Self.latest("system.state", client) == "ok")
    }

    @Test("messages of other hosts lost before they were taken in: a DROP to every subscriber now, and to one resuming from before later")
    func missedImports() throws {
        let harness = BrokerHarness()
        let live = harness.connect()
        live.send("SUB fed.>\n")
        _ = try live.received()
        let before = harness.now
        harness.broker.announceMissedImports(count: 7)
        harness.broker.flush()
        let told = try live.received().compactMap { frame -> DropNotice? in
            if case .dropped(let notice) = frame { return notice }
            return nil
        }
        #expect(told.map(\.count) == [7] && told.first?.isAboutManyTopics == true)

        func dropsOnResume(_ request: String) throws -> [UInt64] {
            let client = harness.connect()
            client.send(request)
            return try client.received().compactMap { frame -> UInt64? in
                switch frame {
                case .dropped(let notice), .missed(_, let notice): return notice.isAboutManyTopics ? notice.count : nil
                default: return nil
                }
            }
        }
        let earlier = PublishTime(microsecondsSinceEpoch: before - 1_000_000).rfc3339
        let later = PublishTime(microsecondsSinceEpoch: harness.now + 1_000_000).rfc3339
        #expect(try dropsOnResume("SUB fed.> since=\(earlier)\n") == [7], "resuming from before the loss")
        #expect(try dropsOnResume("SUB fed.> since=\(later)\n").isEmpty, "resuming from after it")
        #expect(try dropsOnResume("SUB user.1000.> since=\(earlier)\n").isEmpty, "no other host's message is of this host's own topics")
        harness.connect().send("PUB fed.one 1\nx\n")
        #expect(try dropsOnResume("SUB fed.one since=0\n") == [7], "resuming a topic from its start")
    }

    @Test("host names: letters, digits, dot, dash and underscore, 1 to 64 bytes")
    func hostNames() {
        #expect(ImportedMessage.isValidHostName("web-01.example_org"))
        for bad in ["", "a/b", "a b", String(repeating: "h", count: 65), "hôte", "-"] where bad != "-" {
            #expect(!ImportedMessage.isValidHostName(bad), "\(bad)")
        }
    }
}
