import NIOCore
import NotifyBus
import Testing

@testable import notify_cli

/// `notify subscribe` renders what one read brought into one buffer, as bytes; what it prints must stay what it
/// printed when each message was a string of its own (the JSON writer's, for `--format json`).
@Suite("Rendering deliveries as bytes", .timeLimit(.minutes(3)))
struct DeliveryRenderingTests {
    static let payloads: [[UInt8]] = [
        Array("plain text".utf8),
        Array("ends with a line break\n".utf8),
        [],
        Array("quotes \" and \\ backslashes, tab\t, cr\r, lf\n inside".utf8),
        [0x01, 0x1F, 0x7F, 0x41],
        Array("é, ü, 日本, 🚀".utf8),
        [0xFF, 0xFE, 0x00, 0x41],
        [0xC3],
    ]

    static var deliveries: [Delivery] {
        var all: [Delivery] = []
        for (index, payload) in payloads.enumerated() {
            all.append(Delivery(
                topic: try! Topic(index % 2 == 0 ? "backup.status" : "a.\"quoted\\topic"),
                sequence: UInt64(index) * 1_234_567_891 + UInt64(index),
                time: PublishTime(microsecondsSinceEpoch: 1_795_305_600_000_000 + UInt64(index) * 1_001),
                publisher: Publisher(uid: UInt32(index * 1000), pid: index == 3 ? -1 : Int32(index * 77), unit: index % 3 == 0 ? nil : "job\(index).service", host: index % 2 == 0 ? nil : "db1.example.org"),
                payload: ByteBuffer(bytes: payload)
            ))
        }
        return all
    }

    @Test("a drop notice names the bound that dropped: the subscriber's queue, the history, a forgotten topic, the fleet; none said is the queue")
    func dropReasons() throws {
        let topic = try Topic("backup.status")
        func notice(_ reason: DropReason?, many: Bool = false) -> DropNotice {
            DropNotice(topic: many ? DropNotice.manyTopics : topic, count: 36, firstSequence: 65, lastSequence: 100, reason: reason)
        }
        #expect(DeliveryFormat.sentence(notice(.queue)) == "the daemon dropped 36 messages of backup.status (sequence 65 to 100) because this subscriber fell behind")
        #expect(DeliveryFormat.sentence(notice(nil)) == DeliveryFormat.sentence(notice(.queue)))
        #expect(DeliveryFormat.sentence(notice(.history)) == "36 messages of backup.status (sequence 65 to 100) are missing: the topic's history no longer holds them")
        #expect(DeliveryFormat.sentence(notice(.forgotten)).hasSuffix("the daemon forgot the topic to make room (max-topics)"))
        #expect(DeliveryFormat.sentence(notice(.fleet, many: true)).hasPrefix("36 messages of other hosts were lost before this host could take them in"))
        #expect(!DeliveryFormat.sentence(notice(.fleet, many: true)).contains("fell behind"), "not the subscriber's doing")
        #expect(DeliveryFormat.json(notice(.history)) == #"{"dropped":{"topic":"backup.status","count":36,"first_seq":65,"last_seq":100,"reason":"history"}}"#)
        #expect(DeliveryFormat.json(notice(nil)).hasSuffix(#""reason":null}}"#))
    }

    @Test("json: each delivery as the JSON writer wrote it, then a line break")
    func json() {
        for delivery in Self.deliveries {
            var bytes: [UInt8] = []
            DeliveryFormat.json.render(delivery, into: &bytes)
            #expect(String(decoding: bytes, as: UTF8.self) == DeliveryFormat.json(delivery) + "\n")
            #expect(bytes == Array((DeliveryFormat.json(delivery) + "\n").utf8), "byte for byte")
        }
    }

    @Test("raw and line: the payload (after the topic and a space), ending with one line break")
    func rawAndLine() {
        for delivery in Self.deliveries {
            let payload = Array(delivery.payload.readableBytesView)
            let terminated = payload.last == UInt8(ascii: "\n") ? payload : payload + [UInt8(ascii: "\n")]
            #expect(DeliveryFormat.raw.render(delivery) == terminated)
            #expect(DeliveryFormat.line.render(delivery) == Array(delivery.topic.name.utf8) + [UInt8(ascii: " ")] + terminated)
        }
    }

    @Test("several deliveries in one buffer are each rendered whole, in order")
    func together() {
        var bytes: [UInt8] = []
        for delivery in Self.deliveries { DeliveryFormat.json.render(delivery, into: &bytes) }
        #expect(bytes == Array(Self.deliveries.map { DeliveryFormat.json($0) + "\n" }.joined().utf8))
    }

    @Test("numbers are written as decimal digits, from 0 to UInt64.max")
    func numbers() {
        for value: UInt64 in [0, 1, 9, 10, 99, 100, 1_000_000, UInt64(Int64.max), UInt64.max] {
            var bytes: [UInt8] = []
            JSONBytes.appendNumber(value, to: &bytes)
            #expect(String(decoding: bytes, as: UTF8.self) == String(value))
        }
    }
}
