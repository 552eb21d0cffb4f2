import FoundationEssentials
import NIOCore
import NotifyBus
import Testing

@testable import NotifyCenter

/// A notification of one fixed topic.
struct BackupFinished: NotifyMessage, Codable, Equatable {
    static let topic = Topic.literal("backup.finished")
    var host: String
    var bytes: Int
    var at: Date
}

/// A family of topics, one per host.
struct DiskUsage: NotifyMessage, Codable, Equatable {
    static let topic = Topic.literal("disk.usage")
    static var topics: TopicPattern { .descendants(of: topic) }
    var topic: Topic { Self.topic.appending(host) }
    var host: String
    var percent: Double
}

/// A binary codec: the value is one byte.
struct Level: NotifyMessage, Equatable {
    static let topic = Topic.literal("level")
    static var codec: NotifyCodec<Level> {
        NotifyCodec(
            name: "byte",
            encode: { ByteBuffer(bytes: [$0.value]) },
            decode: { payload in
                guard payload.readableBytes == 1, let byte = payload.getInteger(at: payload.readerIndex, as: UInt8.self) else {
                    throw CodecError.notOneByte(payload.readableBytes)
                }
                return Level(value: byte)
            }
        )
    }
    var value: UInt8

    enum CodecError: Error { case notOneByte(Int) }
}

@Suite("Typed notifications: topics and codecs (no daemon)", .timeLimit(.minutes(3)))
struct NotifyMessageTests {
    static func delivery(_ payload: String, topic: Topic = BackupFinished.topic) -> Delivery {
        Delivery(topic: topic, sequence: 7, time: PublishTime(microsecondsSinceEpoch: 1_000), publisher: Publisher(uid: 1000, pid: 42, unit: "backup.service"), payload: ByteBuffer(string: payload))
    }

    @Test("a Codable value is JSON with ISO 8601 dates to the millisecond and sorted keys, and decodes back")
    func json() throws {
        let value = BackupFinished(host: "db1/a", bytes: 1 << 30, at: Date(timeIntervalSince1970: 1_764_000_000.25))
        let payload = try BackupFinished.codec.encode(value)
        #expect(String(buffer: payload) == #"{"at":"2025-11-24T16:00:00.250Z","bytes":1073741824,"host":"db1/a"}"#)
        #expect(try BackupFinished.codec.decode(payload) == value)
    }

    @Test("what a script sends (other key order, spaces) decodes as the value")
    func fromScript() throws {
        let sent = ByteBuffer(string: #"{ "host": "db2", "at": "2026-11-25T10:00:00Z", "bytes": 5 }"#)
        let value = try BackupFinished.codec.decode(sent)
        #expect(value.host == "db2" && value.bytes == 5)
        #expect(value.at == Date(timeIntervalSince1970: 1_795_600_800))
        // `date -Iseconds`, with an offset.
        let offset = try BackupFinished.codec.decode(ByteBuffer(string: #"{"host":"x","at":"2026-11-25T11:00:00+01:00","bytes":0}"#))
        #expect(offset.at == Date(timeIntervalSince1970: 1_795_600_800))
    }

    @Test("a message that is not the type is an UndecodableNotification that says what and why, never a value")
    func undecodable() throws {
        let wrongDate = #"{"host":"db1","bytes":2,"at":"yesterday"}"#
        for payload in ["not json", #"{"host":"db1"}"#, #"{"host":1,"bytes":2,"at":"2026-11-25T10:00:00Z"}"#, wrongDate, ""] {
            let result = Notifications<BackupFinished>.decode(Self.delivery(payload), with: BackupFinished.codec)
            guard case .failure(let failure) = result else {
                Issue.record("\"\(payload)\" decoded")
                continue
            }
            #expect(failure.expectedType == "BackupFinished")
            #expect(failure.delivery.payload == ByteBuffer(string: payload))
            #expect(failure.reason.hasPrefix("json: "))
            #expect(failure.description.contains("message 7 of backup.finished"))
            #expect(failure.description.contains("uid 1000 pid 42"))
        }
    }

    @Test("a decoded notification carries its provenance")
    func provenance() throws {
        let received = try Notifications<BackupFinished>.decode(
            Self.delivery(#"{"host":"db1","bytes":1,"at":"2026-11-25T10:00:00Z"}"#),
            with: BackupFinished.codec
        ).get()
        #expect(received.value.host == "db1")
        #expect(received.topic == BackupFinished.topic && received.sequence == 7)
        #expect(received.publisher.unit == "backup.service" && received.publisher.pid == 42 && received.host == nil)
    }

    @Test("a fixed topic, or one derived from the value below the family's root")
    func topics() throws {
        let finished = BackupFinished(host: "x", bytes: 0, at: Date(timeIntervalSince1970: 0))
        #expect(finished.topic.name == "backup.finished")
        #expect(BackupFinished.topics == TopicPattern(BackupFinished.topic))
        #expect(DiskUsage(host: "db1", percent: 3).topic.name == "disk.usage.db1")
        #expect(DiskUsage.topics.text == "disk.usage.>")
        #expect(DiskUsage.topics.matches(DiskUsage(host: "db1", percent: 3).topic))
        #expect(!DiskUsage.topics.matches(DiskUsage.topic))
    }

    @Test("a key with dots, wildcards, spaces or controls gives one topic of the family, never a pattern or an error")
    func derivedKeys() throws {
        let root = Topic.literal("disk.usage")
        #expect(root.appending("db1.example.org").name == "disk.usage.db1_example_org")
        #expect(root.appending("a b\tc\u{7F}").name == "disk.usage.a_b_c_")
        #expect(root.appending("*").name == "disk.usage._")
        #expect(root.appending(">").name == "disk.usage._")
        #expect(root.appending("").name == "disk.usage._")
        #expect(root.appending("héllo\u{2028}").name == "disk.usage.héllo_")
        let long = root.appending(String(repeating: "é", count: 300))
        #expect(long.name.utf8.count <= Topic.maxLength)
        #expect(long.name.hasPrefix("disk.usage.éé"))
        #expect(long.tokens.count == 3)
    }

    @Test("a codec of its own: the library decodes deliveries with it; values that are not one byte are undecodable")
    func customCodec() throws {
        // Through the library's decoding of a delivery, not the codec alone.
        guard case .success(let received) = Notifications<Level>.decode(Self.delivery("\u{9}", topic: Level.topic), with: Level.codec) else {
            Issue.record("one byte did not decode as a Level")
            return
        }
        #expect(received.value == Level(value: 9) && received.topic == Level.topic)
        let result = Notifications<Level>.decode(Self.delivery("ab", topic: Level.topic), with: Level.codec)
        guard case .failure(let failure) = result else {
            Issue.record("two bytes decoded as a Level")
            return
        }
        #expect(failure.reason.hasPrefix("byte: notOneByte(2)"))
    }

    @Test("a sender selects by uid, pid, unit and host; nil fields match anyone")
    func sender() {
        let local = Publisher(uid: 1000, pid: 42, unit: "backup.service")
        let remote = Publisher(uid: 65534, pid: 7, unit: nil, host: "b")
        #expect(Sender().matches(local) && Sender().matches(remote))
        #expect(Sender.unit("backup.service").matches(local) && !Sender.unit("backup.service").matches(remote))
        #expect(Sender(uid: 1000, pid: 42).matches(local) && !Sender(uid: 1000, pid: 43).matches(local))
        #expect(Sender(isLocal: true).matches(local) && !Sender(isLocal: true).matches(remote))
        #expect(Sender(host: "b").matches(remote) && !Sender(host: "c").matches(remote))
    }

    @Test("a sender that names a uid, pid or unit and no host is this host's: another host's claim of it does not match")
    func senderIsLocalUnlessItNamesAHost() {
        let local = Publisher(uid: 0, pid: 1, unit: "backup.service")
        let claim = Publisher(uid: 0, pid: 1, unit: "backup.service", host: "alpha")
        for sender in [Sender(uid: 0), Sender(pid: 1), Sender.unit("backup.service"), Sender(uid: 0, pid: 1, unit: "backup.service")] {
            #expect(sender.matches(local) && !sender.matches(claim), "\(sender)")
        }
        #expect(Sender(uid: 0, host: "alpha").matches(claim) && !Sender(uid: 0, host: "alpha").matches(local))
        #expect(Sender(uid: 0, isLocal: false).matches(claim) && !Sender(uid: 0, isLocal: false).matches(local))
        #expect(Sender(uid: 0, isLocal: nil).matches(local), "isLocal nil with a uid: this host, as the default says")
    }
}
