import NIOCore
import Testing

@testable import NotifyBus
@testable import NotifyBroker
@testable import NotifyProtocol

/// Another host's message is a claim from whoever reached the NATS server: what the broker takes in of it is
/// bounded as a local client's publish is, and nothing it claims can trap the daemon, break its clients or its
/// state log, or be charged to a local user (issue 34; broker and state log, no socket).
@Suite("Imports at the trust boundary (broker, no socket)", .timeLimit(.minutes(3)))
struct ImportBoundaryTests {
    static let nobody = PeerCredentials(pid: 1, uid: ImportedMessage.importerUID, gid: ImportedMessage.importerUID)

    static func imported(
        _ topic: String,
        _ payload: ByteBuffer,
        sequence: UInt64,
        uid: UInt32 = 1000,
        unit: String? = "backup.service",
        retain: Bool = true
    ) throws -> ImportedMessage {
        ImportedMessage(
            topic: try Topic(topic),
            payload: payload,
            retain: retain,
            host: "alpha",
            publisher: Publisher(uid: uid, pid: 77, unit: unit),
            sequence: sequence
        )
    }

    @Test("a sequence number past the largest taken in is refused; one at the largest is taken in, and a resume is told of no drop for the numbers it skipped, which were never messages here")
    func forgedSequence() throws {
        let harness = BrokerHarness(configuration: ResumeTests.withHistory)
        let importer = harness.broker.openImporter(peer: Self.nobody)
        let forged = try Self.imported("demo.x", ByteBuffer(string: "forged"), sequence: 9_999_999_999_999_999_999)
        guard case .refused(let error) = harness.broker.publishImported(forged, through: importer) else {
            Issue.record("a sequence number of 9,999,999,999,999,999,999 was taken in")
            return
        }
        #expect(error.code == .malformed && error.message.contains("sequence number"), "\(error)")
        let largest = try Self.imported("demo.x", ByteBuffer(string: "far"), sequence: ImportedMessage.largestSequence)
        #expect(harness.broker.publishImported(largest, through: importer) == .published(sequence: ImportedMessage.largestSequence))
        harness.broker.flush()

        // What notify subscribe sends on every reconnect, by number and by time: the topic's first message here is
        // number 2^61; the numbers before it were never messages here, and no drop of 2.3e18 is announced.
        let client = harness.connect()
        client.send("#1 SUB demo.x since=0\n#2 SUB demo.> since=1970-01-01T00:00:00Z\n")
        let summary = ResumeTests.summary(try client.received())
        #expect(summary == [
            "LAST#1 demo.x \(ImportedMessage.largestSequence)", "OK#1",
            "LAST#2 demo.x \(ImportedMessage.largestSequence)", "OK#2",
        ])
        // Local publishes number on from it, and a restart reads every number back (see ImportRestoreTests).
        client.send("#3 PUB demo.x 1 ack\nz\n")
        #expect(ResumeTests.summary(try client.received()) == ["MSG demo.x \(ImportedMessage.largestSequence + 1)", "OK#3"])
    }

    @Test("a topic's numbers jumped by another host's message: a resume is told how many messages the history let go of, not how many numbers, by number and by time")
    func jumpInTheHistory() throws {
        var configuration = BrokerConfiguration.default
        configuration.history = HistoryLimits(messages: 4, bytes: 1 << 20)
        let harness = BrokerHarness(configuration: configuration)
        let client = harness.connect()
        ResumeTests.publish(5, to: "demo.x", from: client)
        _ = try client.received()
        let importer = harness.broker.openImporter(peer: Self.nobody)
        let jump = ImportedMessage.largestSequence
        let far = try Self.imported("demo.x", ByteBuffer(string: "far"), sequence: jump)
        #expect(harness.broker.publishImported(far, through: importer) == .published(sequence: jump))
        harness.broker.flush()
        // Four more: the history (4) holds jump+1…jump+4 and let go of 1…5 and the jump's message: six messages.
        ResumeTests.publish(4, to: "demo.x", from: client)
        _ = try client.received()
        client.send("#1 SUB demo.x since=2\n#2 SUB demo.> since=1970-01-01T00:00:00Z\n#3 SUB demo.x since=\(jump - 1)\n")
        let summary = ResumeTests.summary(try client.received())
        let held: [UInt64] = (1...4).map { jump + UInt64($0) }
        func answer(_ id: Int, drop: String) -> [String] {
            ["DROP#\(id) demo.x \(drop)"] + held.map { "LAST#\(id) demo.x \($0)" } + ["OK#\(id)"]
        }
        // By number from 2: 3, 4, 5 and the jump's message are gone, and what is told is the six let go of (where
        // in the numbers they were is not kept: over-announced by two, never by 2^61); by time: the six; from just
        // before the jump: that one (the run of numbers is one long there).
        let expected = answer(1, drop: "6 3-\(jump)") + answer(2, drop: "6 \(jump - 5)-\(jump)") + answer(3, drop: "1 \(jump)-\(jump)")
        #expect(summary == expected)
    }

    @Test("counts of sequence ranges are UInt64 and saturate: the widest range is counted, not trapped on")
    func rangeArithmetic() {
        #expect((0...UInt64.max).size == UInt64.max)
        #expect((1...UInt64(Int.max) + 2).size == UInt64(Int.max) + 2)
        #expect((5...5).size == 1)
        var tally = DropTally()
        let topic = try! Topic("t")
        tally.record(topic, count: UInt64.max - 1, first: 1, last: 2)
        tally.record(topic, count: 5, first: 3, last: 9)
        tally.record(DropNotice.manyTopics, count: UInt64.max, first: 0, last: 0)
        tally.record(DropNotice.manyTopics, count: 1, first: 0, last: 0)
        #expect(tally.take().map(\.count) == [UInt64.max, UInt64.max])
    }

    @Test("a unit that is not a unit name is taken in as none: every delivery line stays short, and the log reads back")
    func oversizedUnit() throws {
        let directory = StateLogTests.Directory()
        do {
            let harness = try HistoryPersistenceTests.start(in: directory)
            let subscriber = harness.connect()
            subscriber.send("SUB demo.>\n")
            _ = try subscriber.received()
            let importer = harness.broker.openImporter(peer: Self.nobody)
            let huge = String(repeating: "u", count: 70_000) + ".service"
            for (index, unit) in [huge, "a b.service", "ünit.service", "-", "backup@1.service"].enumerated() {
                let message = try Self.imported("demo.unit", ByteBuffer(string: "\(index)"), sequence: UInt64(index + 1), unit: unit)
                #expect(harness.broker.publishImported(message, through: importer) == .published(sequence: UInt64(index + 1)))
            }
            harness.broker.flush()
            let units = try subscriber.received().compactMap(delivery).map { $0.publisher.unit ?? "none" }
            #expect(units == ["none", "none", "none", "none", "backup@1.service"])
            try harness.broker.saveState()
        }
        let (_, contents) = try StateLog.open(directory: directory.path)
        #expect(contents.problems.isEmpty, "\(contents.problems)")
        #expect(contents.topics["demo.unit"]?.history.count == 5)
        #expect(!ImportedMessage.isValidUnitName(String(repeating: "u", count: 256)))
        #expect(ImportedMessage.isValidUnitName(String(repeating: "u", count: 255)))
        #expect(ImportedMessage.isValidUnitName(#"dev-disk-by\x2duuid-1.device"#))
    }

    @Test("an import over max-payload or max-topic-length is refused, as the same local publish would be")
    func sizeLimits() throws {
        var configuration = BrokerConfiguration.default
        configuration.protocolLimits = ProtocolLimits(maxPayload: 1024, maxTopic: 16, maxLine: 1024)
        let harness = BrokerHarness(configuration: configuration)
        let importer = harness.broker.openImporter(peer: Self.nobody)
        let big = try Self.imported("demo.big", ByteBuffer(repeating: 0x61, count: 100_000), sequence: 1)
        guard case .refused(let tooLarge) = harness.broker.publishImported(big, through: importer) else {
            Issue.record("a 100,000-byte import was taken in under max-payload 1024")
            return
        }
        #expect(tooLarge.code == .payloadTooLarge)
        let long = try Self.imported("demo.a-topic-name-too-long", ByteBuffer(string: "x"), sequence: 1)
        guard case .refused(let tooLong) = harness.broker.publishImported(long, through: importer) else {
            Issue.record("a 26-byte topic was taken in under max-topic-length 16")
            return
        }
        #expect(tooLong.code == .invalidTopic)
        #expect(harness.broker.publishImported(try Self.imported("demo.ok", ByteBuffer(repeating: 0x61, count: 1024), sequence: 1), through: importer) == .published(sequence: 1))
        #expect(harness.broker.topicTable["demo.big"] == nil && harness.broker.topicTable["demo.ok"] != nil)
    }

    @Test("restored, another host's messages are charged to nobody, as while running: the uid they claim keeps its quota")
    func restoredCharge() throws {
        var configuration = ResumeTests.withHistory
        configuration.maxRetainedTopicsPerUser = 3
        let directory = StateLogTests.Directory()
        do {
            let harness = try HistoryPersistenceTests.start(in: directory, configuration)
            let importer = harness.broker.openImporter(peer: Self.nobody)
            for index in 1...3 {
                let claim = try Self.imported("demo.claim\(index)", ByteBuffer(string: "x"), sequence: 1, uid: 1000)
                #expect(harness.broker.publishImported(claim, through: importer) == .published(sequence: 1))
            }
            harness.broker.flush()
            try harness.broker.saveState()
        }
        let harness = try HistoryPersistenceTests.start(in: directory, configuration)
        #expect(harness.broker.connections.accounts[1000] == nil, "uid 1000 holds nothing here")
        #expect(harness.broker.connections.accounts[ImportedMessage.importerUID]?.retainedTopics == 3)
        let local = harness.connect(uid: 1000)
        local.send("#1 PUB demo.mine 1 ack\nx\n")
        #expect(ResumeTests.summary(try local.received()) == ["OK#1"], "uid 1000's own buffered message is not refused")
    }

    @Test("a log holds every record a daemon wrote, whatever max-payload the next one runs with")
    func largeRecordsReadBack() throws {
        var configuration = ResumeTests.withHistory
        configuration.protocolLimits.maxPayload = 4 << 20
        configuration.history = HistoryLimits(messages: 4, bytes: 8 << 20)
        let directory = StateLogTests.Directory()
        do {
            let harness = try HistoryPersistenceTests.start(in: directory, configuration)
            let client = harness.connect()
            client.send("#1 PUB demo.big \(2 << 20) ack\n" + String(repeating: "b", count: 2 << 20) + "\n")
            #expect(ResumeTests.summary(try client.received()) == ["OK#1"])
        }
        let harness = try HistoryPersistenceTests.start(in: directory)
        #expect(harness.broker.topicTable["demo.big"]?.retained?.payloadSize == 2 << 20)
    }
}
