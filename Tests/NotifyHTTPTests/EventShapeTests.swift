import Foundation
import NIOCore
import NIOEmbedded
import NIOWebSocket
import Testing

@testable import NotifyBus
@testable import NotifyHTTP

/// The events a stream sends, in ntfy's shapes with notifyd's fields, framed as JSON lines, SSE or raw lines (no
/// socket).
@Suite("The HTTP gateway's events (no socket)", .timeLimit(.minutes(1)))
struct EventShapeTests {
    static let delivery = Delivery(
        topic: try! Topic("backup.status"),
        sequence: 42,
        time: PublishTime(microsecondsSinceEpoch: 1_795_305_600_123_456),
        publisher: Publisher(uid: 1000, pid: 77, unit: "backup.service", host: "nas"),
        payload: ByteBuffer(string: "done \"at\" 3\\4\n\u{1}ok é")
    )

    static func object(_ event: GatewayEvent) throws -> [String: Any] {
        var buffer = ByteBuffer()
        event.writeJSON(into: &buffer)
        return try #require(try JSONSerialization.jsonObject(with: Data(buffer.readableBytesView)) as? [String: Any])
    }

    @Test("a message is ntfy's object with notifyd's fields; JSON's escapes are right; a payload that is not UTF-8 is base 64")
    func message() throws {
        let object = try Self.object(.message(Self.delivery))
        #expect(object["event"] as? String == "message")
        #expect(object["topic"] as? String == "backup.status")
        #expect(object["message"] as? String == "done \"at\" 3\\4\n\u{1}ok é")
        #expect(object["time"] as? Int == 1_795_305_600)
        #expect(object["time_us"] as? Int == 1_795_305_600_123_456)
        #expect(object["seq"] as? Int == 42 && object["uid"] as? Int == 1000 && object["pid"] as? Int == 77)
        #expect(object["unit"] as? String == "backup.service" && object["host"] as? String == "nas")
        #expect(MessageID((object["id"] as? String ?? "")[...]) == MessageID(time: Self.delivery.time, sequence: 42))
        #expect(object["encoding"] == nil)

        var binary = Self.delivery
        binary.payload = ByteBuffer(bytes: [0xFF, 0x00, 0x80])
        binary.publisher = Publisher(uid: 0, pid: 1)
        let encoded = try Self.object(.message(binary))
        #expect(encoded["encoding"] as? String == "base64" && encoded["message"] as? String == "/wCA")
        #expect(encoded["unit"] == nil && encoded["host"] == nil)
    }

    @Test("numbers are written whole at both ends of their range; a payload cut inside a character is not text")
    func numbersAndCutText() {
        for sequence in [UInt64(0), 9, 10, UInt64.max] {
            var delivery = Self.delivery
            delivery.sequence = sequence
            var buffer = ByteBuffer()
            GatewayEvent.message(delivery).writeJSON(into: &buffer)
            #expect(String(buffer: buffer).contains(#","seq":\#(sequence),"#), "\(sequence)")
        }
        #expect(GatewayEvent.isUTF8(UnsafeRawBufferPointer(start: nil, count: 0)))
        for (bytes, text) in [([UInt8]("é€😀".utf8), true), ([0xC3], false), ([0xE2, 0x82], false), ([0xED, 0xA0, 0x80], false), ([0x41, 0xFF], false)] {
            #expect(bytes.withUnsafeBytes(GatewayEvent.isUTF8) == text, "\(bytes)")
        }
    }

    @Test("a message's object written at once, framed as each stream frames it, is byte for byte the one written field by field: escapes, every control character, non-ASCII text, empty and long payloads, numbers at their ends, with and without unit and host")
    func messageAtOnceIsFieldByField() {
        var payloads = [Self.delivery.payload, ByteBuffer(), ByteBuffer(string: String(repeating: "ab\"cd", count: 2_000)), ByteBuffer(string: "é€😀 ünïcödé")]
        payloads.append(ByteBuffer(bytes: Array(0..<0x80)))
        for payload in payloads {
            for (unit, host) in [("backup.service", "nas"), (nil, nil), ("a\"b", nil), (nil, "h\u{7}")] as [(String?, String?)] {
                for sequence in [UInt64(0), 35, 36, UInt64.max] {
                    var delivery = Self.delivery
                    delivery.payload = payload
                    delivery.sequence = sequence
                    delivery.time = PublishTime(microsecondsSinceEpoch: sequence)
                    delivery.publisher = Publisher(uid: sequence == 0 ? 0 : UInt32.max, pid: sequence == 0 ? -1 : Int32.max, unit: unit, host: host)
                    var atOnce = ByteBuffer(), fieldByField = ByteBuffer()
                    #expect(MessageJSON.write(delivery, into: &atOnce))
                    GatewayEvent.message(delivery).writeJSONFieldByField(into: &fieldByField)
                    #expect(atOnce == fieldByField, "\(String(buffer: atOnce)) against \(String(buffer: fieldByField))")
                    for format in [StreamFormat.json, .sse, .webSocket, .raw] {
                        var framed = ByteBuffer(), framedFieldByField = ByteBuffer()
                        format.write(.message(delivery), into: &framed)
                        format.writeFieldByField(.message(delivery), into: &framedFieldByField)
                        #expect(framed == framedFieldByField, "\(format)")
                    }
                }
            }
        }
        var binary = Self.delivery
        binary.payload = ByteBuffer(bytes: [0x41, 0xFF])
        var untouched = ByteBuffer(string: "before")
        #expect(!MessageJSON.write(binary, into: &untouched) && untouched == ByteBuffer(string: "before"), "not UTF-8: left to the field-by-field writer, nothing written")
        for (bytes, ascii) in [([UInt8](), true), (Array("0123456789abcdefX".utf8), true), (Array("0123456789abcdeé".utf8), false), ([0x80], false)] {
            #expect(bytes.withUnsafeBytes(MessageJSON.isASCII) == ascii, "\(bytes)")
        }
    }

    @Test("open, keepalive and dropped carry ntfy's id, time and topic; dropped says how many and which")
    func others() throws {
        let at = PublishTime(microsecondsSinceEpoch: 2_000_000)
        #expect(try Self.object(.open(topics: "a,b.*", at: at))["event"] as? String == "open")
        #expect(try Self.object(.keepalive(topics: "a", at: at))["topic"] as? String == "a")
        let dropped = try Self.object(.dropped(DropNotice(topic: try Topic("a"), count: 3, firstSequence: 5, lastSequence: 7), at: at))
        #expect(dropped["event"] as? String == "dropped" && dropped["count"] as? Int == 3)
        #expect(dropped["first_seq"] as? Int == 5 && dropped["last_seq"] as? Int == 7 && dropped["time"] as? Int == 2)
    }

    @Test("framing: a JSON line; SSE's default event for a message and a named one for the rest; raw lines")
    func framing() {
        func framed(_ event: GatewayEvent, _ format: StreamFormat) -> String {
            var buffer = ByteBuffer()
            format.write(event, into: &buffer)
            return String(buffer: buffer)
        }
        let message = GatewayEvent.message(Self.delivery)
        let at = PublishTime(microsecondsSinceEpoch: 2_000_000)
        #expect(framed(message, .json).hasSuffix("}\n") && framed(message, .json).filter { $0 == "\n" }.count == 1)
        #expect(framed(message, .sse).hasPrefix("id: \(MessageID(time: Self.delivery.time, sequence: 42))\ndata: {"))
        #expect(framed(message, .sse).hasSuffix("}\n\n"))
        #expect(framed(.open(topics: "a", at: at), .sse).hasPrefix("event: open\ndata: {"))
        #expect(framed(.keepalive(topics: "a", at: at), .sse).hasPrefix("event: keepalive\ndata: {"))
        #expect(framed(message, .raw) == "done \"at\" 3\\4  ok é\n")
        #expect(framed(.keepalive(topics: "a", at: at), .raw) == "\n")
        #expect(framed(.open(topics: "a", at: at), .raw) == "\n")
        let drop = GatewayEvent.dropped(DropNotice(topic: try! Topic("a"), count: 3, firstSequence: 5, lastSequence: 7), at: at)
        #expect(framed(drop, .raw) == "notifyd: 3 messages of a were dropped (5-7)\n")
    }

    @Test("a WebSocket's events are whole text frames of every length's header (7, 16 and 64 bits), as NIO's decoder reads them back")
    func webSocketFrames() throws {
        let sizes = [0, 10, 300, 70_000]
        let events: [GatewayEvent] = sizes.enumerated().map { index, size in
            var delivery = Self.delivery
            delivery.payload = ByteBuffer(repeating: UInt8(ascii: "x"), count: size)
            delivery.sequence = UInt64(index)
            return GatewayEvent.message(delivery)
        } + [GatewayEvent.open(topics: "a", at: PublishTime(microsecondsSinceEpoch: 1))]
        var written: [ByteBuffer] = []
        _ = WebSocketStreamTransport.write(events, format: .webSocket, allocator: ByteBufferAllocator()) { written.append($0) }
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: 1 << 20)))
        for buffer in written { try channel.writeInbound(buffer) }
        var payloads: [ByteBuffer] = []
        while let frame = try channel.readInbound(as: WebSocketFrame.self) {
            #expect(frame.fin && frame.opcode == .text && frame.maskKey == nil)
            payloads.append(frame.unmaskedData)
        }
        #expect(try channel.finish().isClean)
        #expect(payloads == events.map { event in
            var json = ByteBuffer()
            event.writeJSON(into: &json)
            return json
        })
    }
}
