import Foundation
import NATSClient
import NIOCore
import NotifyProtocol
import Testing

@testable import NotifyFleet

/// The NATS bridge's settings from the command line and `[nats]`, without a server.
@Suite("NATS bridge settings", .timeLimit(.minutes(3)))
struct BridgeSettingsTests {
    typealias File = TemporaryFile

    @Test("no servers: an error saying what to give; --nats alone gives the defaults: everything both ways, prefix notifyd, the hostname")
    func defaults() async throws {
        #expect {
            _ = try FleetSettings.load(overrides: FleetSettings.Overrides(), configurationFile: "/dev/null")
        } throws: { error in
            "\(error)".contains("names no NATS server: give --nats nats://HOST:PORT, or servers = under [nats]")
        }
        var overrides = FleetSettings.Overrides()
        overrides.servers = ["nats://10.0.0.1:4222", "10.0.0.2", "[::1]:5222"]
        let bridge = try FleetSettings.load(overrides: overrides, configurationFile: "/dev/null").bridge
        #expect(bridge.servers.map(\.description) == ["nats://10.0.0.1:4222", "nats://10.0.0.2:4222", "nats://[::1]:5222"])
        #expect(bridge.exports.map(\.text) == [">"] && bridge.imports.map(\.text) == [">"])
        #expect(bridge.prefix == "notifyd" && bridge.hostName == BridgeSettings.systemHostName())
        #expect(bridge.outboxBytes == 16 << 20)
    }

    @Test("[nats] sets them all; the command line wins; --check-config prints them")
    func section() async throws {
        let file = File(
            """
            [nats]
            servers = nats://a:4222, nats://b:4223
            export = backup.> jobs.*
            import = backup.>
            prefix = fleet.notifyd
            host-name = web-01
            outbox-bytes = 1048576
            stream-replicas = 3

            """
        )
        let settings = try FleetSettings.load(overrides: FleetSettings.Overrides(), configurationFile: file.path)
        let bridge = settings.bridge
        #expect(bridge.servers.map(\.description) == ["nats://a:4222", "nats://b:4223"])
        #expect(bridge.exports.map(\.text) == ["backup.>", "jobs.*"] && bridge.imports.map(\.text) == ["backup.>"])
        #expect(bridge.prefix == "fleet.notifyd" && bridge.hostName == "web-01" && bridge.outboxBytes == 1 << 20 && bridge.streamReplicas == 3)
        #expect(settings.bridge.summary.hasSuffix("[nats]\nservers = nats://a:4222 nats://b:4223\nexport = backup.> jobs.*\nimport = backup.>\nprefix = fleet.notifyd\nhost-name = web-01\noutbox-bytes = 1048576\nstream-replicas = 3\ncatch-up = 3600s\ncatch-up-bytes = 268435456"))

        var overrides = FleetSettings.Overrides()
        overrides.servers = ["c"]
        overrides.hostName = "db-02"
        overrides.imports = ["db.>"]
        let both = try FleetSettings.load(overrides: overrides, configurationFile: file.path).bridge
        #expect(both.servers.map(\.description) == ["nats://c:4222"] && both.hostName == "db-02" && both.imports.map(\.text) == ["db.>"])
        #expect(both.exports.map(\.text) == ["backup.>", "jobs.*"], "what the command line does not set comes from the file")
    }

    @Test("what cannot be used is refused with its line", arguments: [
        ("[nats]\nservers = http://a:4222\n", "line 2", "nats://HOST:PORT or tls://HOST:PORT"),
        ("[nats]\nservers = nats://user:pw@a\n", "line 2", "credentials"),
        ("[nats]\nservers = a:99999\n", "line 2", "port"),
        ("[nats]\nservers = a\nexport = a..b\n", "line 3", "export pattern"),
        ("[nats]\nservers = a\nprefix = $sys\n", "line 3", "prefix"),
        ("[nats]\nservers = a\nhost-name = my host\n", "line 3", "host name"),
        ("[nats]\nservers = a\noutbox-bytes = 10\n", "line 3", "outbox-bytes"),
        ("[nats]\nservers = a\ncluster = b\n", "line 3", "unknown setting \"cluster\""),
        ("[nats]\nexport = a.>\n", "line 2", "names no servers"),
        ("[nats]\nservers = a\nstream-replicas = 7\n", "line 3", "stream-replicas must be 1 to 5"),
        ("[nats]\nservers = a\ncatch-up = 5x\n", "line 3", "catch-up must be a duration"),
        ("[nats]\nservers = a\ncatch-up = -1h\n", "line 3", "catch-up must be a duration"),
        ("[nats]\nservers = a\ncatch-up = 400d\n", "line 3", "at most 365d"),
        ("[nats]\nservers = a\ncatch-up-bytes = 10\n", "line 3", "catch-up-bytes must be"),
    ])
    func refused(text: String, line: String, problem: String) async throws {
        let file = File(text)
        do {
            _ = try FleetSettings.load(overrides: FleetSettings.Overrides(), configurationFile: file.path)
            Issue.record("accepted: \(text)")
        } catch {
            #expect("\(error)".contains(line) && "\(error)".contains(problem), "\(error)")
        }
    }

    @Test("catch-up: 1 hour and 256 MiB by default; durations in s, m, h, d or bare seconds; 0 turns it off")
    func catchUp() async throws {
        var overrides = FleetSettings.Overrides()
        overrides.servers = ["a"]
        let defaults = try FleetSettings.load(overrides: overrides, configurationFile: "/dev/null").bridge
        #expect(defaults.catchUpSeconds == 3600 && defaults.catchUpBytes == 256 << 20)
        for (text, seconds) in [("90s", 90), ("30m", 1800), ("2h", 7200), ("7d", 604_800), ("45", 45), ("0", 0)] as [(String, Int64)] {
            overrides.catchUp = text
            let bridge = try FleetSettings.load(overrides: overrides, configurationFile: "/dev/null").bridge
            #expect(bridge.catchUpSeconds == seconds, "\(text)")
        }
        let file = File("[nats]\nservers = a\ncatch-up = 10m\ncatch-up-bytes = 1048576\n")
        let fromFile = try FleetSettings.load(overrides: FleetSettings.Overrides(), configurationFile: file.path).bridge
        #expect(fromFile.catchUpSeconds == 600 && fromFile.catchUpBytes == 1 << 20)
    }

    @Test("a bridge option on the command line without a server is an error, not ignored")
    func optionWithoutServer() async throws {
        var overrides = FleetSettings.Overrides()
        overrides.exports = ["backup.>"]
        do {
            _ = try FleetSettings.load(overrides: overrides, configurationFile: "/dev/null")
            Issue.record("--nats-export without --nats was accepted")
        } catch {
            #expect("\(error)".contains("--nats-export needs a NATS server"), "\(error)")
        }
    }
}

/// The bridge's outbox: bounded, in order, kept until confirmed.
@Suite("NATS export outbox", .timeLimit(.minutes(3)))
struct ExportOutboxTests {
    static func append(_ text: String, uid: UInt32 = 0, to outbox: inout ExportOutbox) -> Bool {
        outbox.append(uid: uid) { $0.writeString(text) }
    }

    static func drain(_ outbox: inout ExportOutbox) -> String {
        var sent = ""
        while let chunk = outbox.nextUnsent() { sent += String(buffer: chunk) }
        return sent
    }

    @Test("sent in order, kept until confirmed, sent again after a lost connection")
    func order() {
        var outbox = ExportOutbox(limit: 100)
        let first = ["a1", "b2"].map { Self.append($0, to: &outbox) }
        #expect(first == [true, true] && outbox.hasUnsent)
        #expect(Self.drain(&outbox) == "a1b2" && !outbox.hasUnsent)
        let mark = outbox.sentThrough
        #expect(Self.append("c3", to: &outbox))
        #expect(Self.drain(&outbox) == "c3")
        outbox.confirm(through: mark)
        #expect(outbox.count == 1 && outbox.bytes == 2 && outbox.confirmed == 2)
        outbox.resendUnconfirmed()
        #expect(Self.drain(&outbox) == "c3", "not confirmed: sent again")
        outbox.confirm(through: outbox.sentThrough)
        #expect(outbox.count == 0 && outbox.bytes == 0 && outbox.confirmed == 3)
    }

    @Test("a message past the bound is refused and counted; nothing held is dropped for it")
    func bound() {
        var outbox = ExportOutbox(limit: 10)
        let accepted = ["12345", "6789", "ab", "c"].enumerated().map { Self.append($0.element, uid: UInt32($0.offset), to: &outbox) }
        #expect(accepted == [true, true, false, true])
        #expect(outbox.dropped == 1 && outbox.bytes == 10 && outbox.count == 3)
        #expect(Self.drain(&outbox) == "123456789c")
    }

    @Test("one uid's messages hold at most half the outbox: its flood leaves room for the others, and confirmed ones free its share")
    func sharePerUID() {
        var outbox = ExportOutbox(limit: 100)
        let flood = (0..<10).map { _ in Self.append(String(repeating: "f", count: 10), uid: 1000, to: &outbox) }
        #expect(flood == Array(repeating: true, count: 5) + Array(repeating: false, count: 5))
        #expect(outbox.dropped == 5 && outbox.droppedOverShare == 5 && outbox.bytes == 50)
        #expect(Self.append(String(repeating: "o", count: 40), uid: 0, to: &outbox), "another uid's message finds room")
        #expect(Self.append(String(repeating: "p", count: 10), uid: 1001, to: &outbox))
        #expect(!Self.append("q", uid: 1002, to: &outbox) && outbox.droppedOverShare == 5, "the outbox itself is full now")
        _ = Self.drain(&outbox)
        outbox.confirm(through: outbox.sentThrough)
        #expect(Self.append(String(repeating: "f", count: 50), uid: 1000, to: &outbox), "confirmed messages give their uid its share back")
    }

    @Test("two uids flooding leave a third for the others; a uid holding nothing may send a message over its share")
    func sharesShrinkAsUIDsCome() {
        var outbox = ExportOutbox(limit: 90)
        while Self.append("aaaaa", uid: 1, to: &outbox) {}
        #expect(outbox.bytes == 45, "alone, half")
        while Self.append("bbbbb", uid: 2, to: &outbox) {}
        #expect(outbox.bytes == 75, "the second uid: its first message, then a third (30)")
        #expect(!Self.append("aaaaa", uid: 1, to: &outbox), "the first is past a third now")
        #expect(Self.append(String(repeating: "c", count: 15), uid: 3, to: &outbox), "the rest is the others'")
        var large = ExportOutbox(limit: 100)
        #expect(Self.append(String(repeating: "l", count: 80), uid: 4, to: &large), "over half, but the uid holds nothing")
        #expect(!Self.append("l", uid: 4, to: &large))
    }

    @Test("many messages go out in chunks of about 64 KiB, each confirmed whole")
    func chunks() {
        var outbox = ExportOutbox(limit: 1 << 20)
        let message = String(repeating: "m", count: 1000)
        for _ in 0..<200 { _ = Self.append(message, to: &outbox) }
        var sizes: [Int] = []
        while let chunk = outbox.nextUnsent() { sizes.append(chunk.readableBytes) }
        #expect(sizes.reduce(0, +) == 200_000 && sizes.count == 4 && sizes.dropLast().allSatisfy { $0 == 66_000 })
        outbox.confirm(through: outbox.sentThrough)
        #expect(outbox.count == 0 && outbox.confirmed == 200)
    }
}

/// The provenance headers, written by one host and read by another.
@Suite("NATS provenance headers", .timeLimit(.minutes(3)))
struct ProvenanceTests {
    @Test("an export reads back as it was published, on both subjects of a retained message")
    func roundTrip() throws {
        var encoder = ExportEncoder(prefix: "fleet", hostName: "web-01")
        var buffer = ByteBuffer()
        let message = FleetExport(
            delivery: Delivery(
                topic: try Topic("backup.status"),
                sequence: 42,
                time: PublishTime(microsecondsSinceEpoch: 1_795_305_600_123_456),
                publisher: Publisher(uid: 1000, pid: 4242, unit: "backup.service"),
                payload: ByteBuffer(string: "done")
            ),
            kind: .retained
        )
        encoder.write(message, into: &buffer)
        let text = String(buffer: buffer)
        let headers = "NATS/1.0\r\nNotifyd: 1 web-01 1000 4242 42 1795305600123456 r - - backup.service\r\n\r\n"
        let size = headers.utf8.count
        #expect(text == "HPUB fleet.backup.status \(size) \(size + 4)\r\n\(headers)done\r\nHPUB fleet-latest.backup.status \(size) \(size + 4)\r\n\(headers)done\r\n")

        // Through the server's side of the codec: what a subscriber reads.
        var wire = ByteBuffer(string: "HMSG fleet.backup.status 1 \(size) \(size + 4)\r\n\(headers)done\r\n")
        guard case .message(let received)? = try NATSServerDecoder().decode(buffer: &wire) else {
            Issue.record("no message decoded")
            return
        }
        var expected = Provenance()
        expected.host = "web-01"
        expected.uid = 1000
        expected.pid = 4242
        expected.unit = "backup.service"
        expected.sequence = 42
        expected.time = 1_795_305_600_123_456
        #expect(Provenance(headers: received.headers) == expected)

        // A clear: no payload, of kind c on both subjects, read back as a clear.
        var clear = message
        clear.delivery.payload = ByteBuffer()
        clear.kind = .clear
        var clearBuffer = ByteBuffer()
        encoder.write(clear, into: &clearBuffer)
        let clearHeaders = headers.replacingOccurrences(of: " r - - ", with: " c - - ")
        let clearSize = clearHeaders.utf8.count
        #expect(String(buffer: clearBuffer) == "HPUB fleet.backup.status \(clearSize) \(clearSize)\r\n\(clearHeaders)\r\nHPUB fleet-latest.backup.status \(clearSize) \(clearSize)\r\n\(clearHeaders)\r\n")
        var clearWire = ByteBuffer(string: "HMSG fleet.backup.status 1 \(clearSize) \(clearSize)\r\n\(clearHeaders)\r\n")
        guard case .message(let receivedClear)? = try NATSServerDecoder().decode(buffer: &clearWire) else {
            Issue.record("no clear decoded")
            return
        }
        expected.isClear = true
        #expect(Provenance(headers: receivedClear.headers) == expected)
    }

    @Test("numbered, not retained, no unit: the export and the log in their fields, dashes for the rest; one header of about 80 bytes")
    func numbered() throws {
        var encoder = ExportEncoder(prefix: "fleet", hostName: "web-01", epoch: 1_795_305_600_000_001, numbers: true)
        encoder.logSequence = 77
        let message = FleetExport(
            delivery: Delivery(
                topic: try Topic("t"),
                sequence: 9,
                time: PublishTime(microsecondsSinceEpoch: 1_795_305_600_123_456),
                publisher: Publisher(uid: 0, pid: 1, unit: "not a unit"),
                payload: ByteBuffer(string: "x")
            ),
            kind: .notRetained
        )
        var buffer = ByteBuffer()
        encoder.write(message, into: &buffer)
        let headers = "NATS/1.0\r\nNotifyd: 1 web-01 0 1 9 1795305600123456 m 1795305600000001-1 77 -\r\n\r\n"
        #expect(String(buffer: buffer) == "HPUB fleet.t \(headers.utf8.count) \(headers.utf8.count + 1)\r\n\(headers)x\r\n")
        let read = try Self.provenance([("Notifyd", "1 web-01 0 1 9 1795305600123456 m 1795305600000001-1 77 -")])
        #expect(read.host == "web-01" && read.sequence == 9 && !read.retain && !read.isClear && read.unit == nil)
        #expect(read.export == ExportStamp(epoch: 1_795_305_600_000_001, number: 1) && read.logSequence == 77)
    }

    @Test("the one header read as strictly as the fields it replaces: another version or too few fields is not read; each field bounded")
    func oneHeaderBounds() throws {
        #expect(try Self.provenance([("Notifyd", "2 web-01 0 1 9 1 m - - -")]).host == nil, "a version this host does not know")
        #expect(try Self.provenance([("Notifyd", "1 web-01 0 1 9 1 m - -")]).host == nil, "nine fields")
        #expect(try Self.provenance([("notifyd", "1 web-01 0 1 9 1 m - - - more")]).host == "web-01", "a field more is for a later version; any case")
        let huge = try Self.provenance([("Notifyd", "1 \(String(repeating: "h", count: 70_000)) 4294967296 -1 99999999999999999999 x z 0-1 y \(String(repeating: "u", count: 300))")])
        #expect(huge.host.map { !FleetImport.isValidHostName($0) } == true && huge.host?.isEmpty == true)
        #expect(huge.uid == 0 && huge.pid == 0 && huge.sequence == 0 && huge.time == 0 && huge.retain && !huge.isClear)
        #expect(huge.export == nil && huge.logSequence == 0 && huge.unit == nil)
        #expect(try Self.provenance([("Notifyd", "1 a 0 1 9 1 c - - getty@tty1.service")]).unit == "getty@tty1.service")
        #expect(try Self.provenance([("Notifyd", "1 a 0 1 9 1 c - - getty@tty1.service")]).isClear)
        #expect(try Self.provenance([("Notifyd", "1 a 0 1 9 1 r - - a/b")]).unit == nil, "not a unit name")
    }

    @Test("a message of another NATS client: no headers, retained, host unknown; names in any case")
    func foreign() {
        let none = Provenance(headers: nil)
        #expect(none.host == nil && none.retain && none.sequence == 0)
        let headers = "NATS/1.0\r\nnotifyd-host: x\r\nNOTIFYD-RETAIN: 0\r\n\r\n"
        var wire = ByteBuffer(string: "HMSG a 1 \(headers.utf8.count) \(headers.utf8.count)\r\n\(headers)\r\n")
        guard case .message(let received)? = try? NATSServerDecoder().decode(buffer: &wire) else {
            Issue.record("no message decoded")
            return
        }
        let read = Provenance(headers: received.headers)
        #expect(read.host == "x" && !read.retain)
    }

    /// The provenance of `fields`, as headers of a message read off the wire.
    static func provenance(_ fields: [(String, String)]) throws -> Provenance {
        let headers = "NATS/1.0\r\n" + fields.map { "\($0.0): \($0.1)\r\n" }.joined() + "\r\n"
        let size = headers.utf8.count
        var wire = ByteBuffer(string: "HMSG a 1 \(size) \(size)\r\n\(headers)\r\n")
        guard case .message(let received)? = try NATSServerDecoder().decode(buffer: &wire) else {
            throw NATSError("no message decoded")
        }
        return Provenance(headers: received.headers)
    }

    @Test("each field is bounded where it enters: a unit that is not a unit name is none, a host past 64 bytes is not one")
    func boundedFields() throws {
        let huge = try Self.provenance([("Notifyd-Host", String(repeating: "h", count: 70_000)), ("Notifyd-Unit", String(repeating: "u", count: 70_000))])
        #expect(huge.unit == nil && huge.host.map { !FleetImport.isValidHostName($0) } == true)
        #expect(try Self.provenance([("Notifyd-Unit", "a b")]).unit == nil)
        #expect(try Self.provenance([("Notifyd-Unit", "getty@tty1.service")]).unit == "getty@tty1.service")
        let numbers = try Self.provenance([("Notifyd-Seq", "9999999999999999999"), ("Notifyd-Uid", "4294967296"), ("Notifyd-Pid", "-1")])
        #expect(numbers.sequence == 9_999_999_999_999_999_999 && numbers.uid == 0 && numbers.pid == 0, "read as written; the broker refuses the number")
        #expect(try Self.provenance([("Notifyd-Seq", "99999999999999999999")]).sequence == 0, "past 19 digits: no number")
    }
}

/// How the bridge reads JetStream's replies.
@Suite("JetStream replies", .timeLimit(.minutes(3)))
struct JetStreamReplyTests {
    @Test("the stream sequence and pending count of a consumer's message, in both forms of its reply subject")
    func delivery() {
        #expect(JetStreamDelivery(replySubject: "$JS.ACK.s.c.1.5.1.1700000000.3") == JetStreamDelivery(stream: "s", consumer: "c", streamSequence: 5, pending: 3))
        #expect(JetStreamDelivery(replySubject: "$JS.ACK.domain.hash.s.c.1.7.1.1700000000.0.rnd") == JetStreamDelivery(stream: "s", consumer: "c", streamSequence: 7, pending: 0))
        #expect(JetStreamDelivery(replySubject: "$JS.ACK.s.c.1.x.1.1700000000.3") == nil)
        #expect(JetStreamDelivery(replySubject: "_INBOX.x") == nil)
        #expect(JetStreamDelivery(replySubject: nil) == nil)
    }

    @Test("stream and subject names from the prefix and the host name")
    func names() throws {
        let latest = JetStreamLatest(prefix: "fleet.notifyd")
        #expect(latest.streamName == "fleet_notifyd_latest" && latest.subjectRoot == "fleet.notifyd-latest")
        var settings = try #require(try BridgeSettings.resolve(servers: ["a"], exports: [], imports: [], prefix: "fleet.notifyd", hostName: "web.01", outboxBytes: nil, section: [:], path: "-"))
        settings.catchUpSeconds = 60
        let log = JetStreamLog(settings: settings)
        #expect(log.streamName == "fleet_notifyd_log" && log.allSubjects == "fleet.notifyd_log.>")
        #expect(log.subject(of: "web.01") == "fleet.notifyd_log.web.01")
        #expect(log.host(of: "fleet.notifyd_log.web.01") == "web.01")
        #expect(log.host(of: "fleet.notifyd.web.01") == nil, "a live subject is no record's")
        #expect(log.earlierStreamName == "fleet_notifyd_events")
    }
}

/// The window's newest retained message of each topic, for the stream of latest messages.
@Suite("Latest messages, coalesced", .timeLimit(.minutes(3)))
struct LatestCoalescerTests {
    static func export(_ topic: String, _ text: String, _ kind: FleetMessageKind = .retained) throws -> FleetExport {
        FleetExport(
            delivery: Delivery(topic: try Topic(topic), sequence: 1, time: PublishTime(microsecondsSinceEpoch: 1), publisher: Publisher(uid: 0, pid: 1), payload: ByteBuffer(string: text)),
            kind: kind
        )
    }

    @Test("the newest of each topic, in the order the topics came; a clear replaces a message and a message a clear; counted; bounded by bytes")
    func newestWins() throws {
        var coalescer = LatestCoalescer()
        for (topic, text, kind) in [("a", "1", FleetMessageKind.retained), ("b", "1", .retained), ("a", "2", .retained), ("b", "", .clear), ("a", "3", .retained)] {
            coalescer.note(try Self.export(topic, text, kind))
        }
        #expect(coalescer.bytes == 1 && coalescer.coalesced == 3)
        let taken = coalescer.take()
        #expect(taken.map { "\($0.delivery.topic.name) \($0.delivery.text ?? "") \($0.kind)" } == ["a 3 retained", "b  clear"])
        #expect(coalescer.isEmpty && coalescer.bytes == 0)
        coalescer.note(try Self.export("c", String(repeating: "x", count: LatestCoalescer.byteLimit)))
        #expect(coalescer.isFull, "a window that holds its bound ends at once")
    }
}
