import NIOCore
import NotifyBus

/// How a stream frames its events: ntfy's three subscribe endpoints.
enum StreamFormat: String, Sendable {
    /// `/json`: one JSON object a line.
    case json
    /// `/sse`: Server-Sent Events, for a browser's `EventSource`: a message is a `data:` line (the default event, so
    /// `onmessage` gets it) with its `id:`, which a reconnecting `EventSource` sends back as `Last-Event-ID` to resume
    /// after it; `open`, `keepalive` and `dropped` name their event.
    case sse
    /// `/raw`: one line a message, its text (line breaks and other control characters made spaces); `open` and a keepalive are an empty line (so
    /// the response starts at once); a drop is a line of its own starting `notifyd: ` (never silent).
    case raw
    /// `/ws`: a WebSocket, each event a text message of its own holding its JSON object.
    case webSocket

    /// The formats served as an HTTP response (the WebSocket's has a route of its own).
    static let httpStreams: [StreamFormat] = [.json, .sse, .raw]

    /// Whether each event is a write of its own rather than gathered with others.
    var isFramedPerEvent: Bool { self == .webSocket }

    var contentType: String {
        switch self {
        case .json: "application/x-ndjson; charset=utf-8"
        case .sse: "text/event-stream; charset=utf-8"
        case .raw: "text/plain; charset=utf-8"
        case .webSocket: "application/json"
        }
    }

    /// Appends `event`, framed, to `buffer`.
    func write(_ event: GatewayEvent, into buffer: inout ByteBuffer) {
        // A message, the event a stream sends most, framed in the one write of its object.
        if case .message(let delivery) = event, self != .raw,
            MessageJSON.write(delivery, framed: self == .sse ? .serverSentEvent : self == .json ? .line : .bare, into: &buffer)
        {
            return
        }
        writeFieldByField(event, into: &buffer)
    }

    /// Appends `event`, framed, its object written field by field (what ``write(_:into:)`` does at once for a
    /// message, and is tested against).
    func writeFieldByField(_ event: GatewayEvent, into buffer: inout ByteBuffer) {
        switch self {
        case .json:
            event.writeJSONFieldByField(into: &buffer)
            buffer.writeStaticString("\n")
        case .webSocket:
            event.writeJSONFieldByField(into: &buffer)
        case .sse:
            switch event {
            case .message(let delivery):
                buffer.writeStaticString("id: ")
                MessageID(time: delivery.time, sequence: delivery.sequence).write(into: &buffer)
                buffer.writeStaticString("\n")
            case .open: buffer.writeStaticString("event: open\n")
            case .keepalive: buffer.writeStaticString("event: keepalive\n")
            case .dropped: buffer.writeStaticString("event: dropped\n")
            }
            buffer.writeStaticString("data: ")
            event.writeJSONFieldByField(into: &buffer)
            buffer.writeStaticString("\n\n")
        case .raw:
            switch event {
            case .message(let delivery):
                StreamFormat.writeLine(delivery.payload, into: &buffer)
            case .dropped(let notice, _):
                if notice.topic == DropNotice.manyTopics {
                    buffer.writeString("notifyd: \(notice.count) messages of several topics were dropped\n")
                } else {
                    buffer.writeString("notifyd: \(notice.count) messages of \(notice.topic.name) were dropped (\(notice.firstSequence)-\(notice.lastSequence))\n")
                }
            case .keepalive, .open:
                buffer.writeStaticString("\n")
            }
        }
    }

    /// The payload on one line, safe to print to a terminal: its line breaks and every other control character
    /// (C0 but tab, DEL, and C1 written in UTF-8, which some terminals obey as escape sequences) made spaces.
    private static func writeLine(_ payload: ByteBuffer, into buffer: inout ByteBuffer) {
        let start = buffer.writerIndex - buffer.readerIndex
        buffer.writeImmutableBuffer(payload)
        buffer.withUnsafeMutableReadableBytes { bytes in
            var index = start
            while index < bytes.count {
                let byte = bytes[index]
                if (byte < 0x20 && byte != UInt8(ascii: "\t")) || byte == 0x7F {
                    bytes[index] = UInt8(ascii: " ")
                } else if byte == 0xC2, index + 1 < bytes.count, (0x80...0x9F).contains(bytes[index + 1]) {
                    bytes[index] = UInt8(ascii: " ")
                    bytes[index + 1] = UInt8(ascii: " ")
                    index += 1
                }
                index += 1
            }
        }
        buffer.writeStaticString("\n")
    }
}
