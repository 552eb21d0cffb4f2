import Foundation
import NIOCore
import NotifyBus

/// What a stream sends, in ntfy's shapes, with notifyd's own fields beside them.
///
/// A message is `{"id", "time", "event": "message", "topic", "message", …}` as ntfy sends it (`time` in seconds),
/// with `seq`, `time_us`, `uid`, `pid`, and `unit` and `host` when known; a payload that is not UTF-8 is sent in
/// base 64 with `"encoding": "base64"`. `open` and `keepalive` are ntfy's. What the daemon dropped for a reader
/// that fell behind is notifyd's own event, `dropped`, with `count` and the numbers `first_seq` and `last_seq`
/// (0 when they span topics): never silent.
enum GatewayEvent {
    case message(Delivery)
    case dropped(DropNotice, at: PublishTime)
    case open(topics: String, at: PublishTime)
    case keepalive(topics: String, at: PublishTime)

    /// The event as one JSON object, appended to `buffer`.
    func writeJSON(into buffer: inout ByteBuffer) {
        if case .message(let delivery) = self, MessageJSON.write(delivery, into: &buffer) { return }
        writeJSONFieldByField(into: &buffer)
    }

    /// The event as one JSON object, each field written by ``JSONWriter``: every event but a message with a UTF-8
    /// payload, which ``MessageJSON`` writes at once (and which its tests compare with this).
    func writeJSONFieldByField(into buffer: inout ByteBuffer) {
        JSONWriter.object(into: &buffer) { json in writeFields(into: &json) }
    }

    private func writeFields(into json: inout JSONWriter) {
        switch self {
        case .message(let delivery):
            json.field("id", id: MessageID(time: delivery.time, sequence: delivery.sequence))
            json.field("time", delivery.time.microsecondsSinceEpoch / 1_000_000)
            json.field("event", "message")
            json.field("topic", delivery.topic.name)
            GatewayEvent.writeMessage(delivery.payload, into: &json)
            json.field("seq", delivery.sequence)
            json.field("time_us", delivery.time.microsecondsSinceEpoch)
            json.field("uid", UInt64(delivery.publisher.uid))
            json.field("pid", UInt64(max(delivery.publisher.pid, 0)))
            if let unit = delivery.publisher.unit { json.field("unit", unit) }
            if let host = delivery.publisher.host { json.field("host", host) }
        case .dropped(let notice, let time):
            json.field("id", id: MessageID(time: time, sequence: 0))
            json.field("time", time.microsecondsSinceEpoch / 1_000_000)
            json.field("event", "dropped")
            json.field("topic", notice.topic.name)
            json.field("count", notice.count)
            json.field("first_seq", notice.firstSequence)
            json.field("last_seq", notice.lastSequence)
        case .open(let topics, let time), .keepalive(let topics, let time):
            json.field("id", id: MessageID(time: time, sequence: 0))
            json.field("time", time.microsecondsSinceEpoch / 1_000_000)
            if case .open = self { json.field("event", "open") } else { json.field("event", "keepalive") }
            json.field("topic", topics)
        }
    }

    /// Whether `bytes` are valid UTF-8, checked where they are (no string made of them).
    static func isUTF8(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var iterator = bytes.makeIterator()
        var decoder = UTF8()
        while true {
            switch decoder.decode(&iterator) {
            case .scalarValue: continue
            case .emptyInput: return true
            case .error: return false
            }
        }
    }

    /// `"message"`: the payload as text when it is UTF-8, else in base 64 with `"encoding": "base64"`.
    static func writeMessage(_ payload: ByteBuffer, into json: inout JSONWriter) {
        let isText = payload.withUnsafeReadableBytes(GatewayEvent.isUTF8)
        if isText {
            payload.withUnsafeReadableBytes { json.field("message", utf8: $0) }
        } else {
            json.field("message", Data(payload.readableBytesView).base64EncodedString())
            json.field("encoding", "base64")
        }
    }
}
