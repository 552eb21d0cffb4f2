public import ArgumentParser
import NotifyBus

extension OverflowPolicy: ExpressibleByArgument {}

/// How a delivered message is printed.
enum DeliveryFormat: String, ExpressibleByArgument, CaseIterable {
    /// The payload alone.
    case raw
    /// `topic payload`.
    case line
    /// One JSON object per message.
    case json

    /// The bytes to print for `delivery`, ending with exactly one line break.
    ///
    /// `raw` and `line` add a line break unless the payload ends with one, so `echo hi | notify send t` then
    /// `notify latest t` prints `hi` once. Exact bytes: use `json`, whose `payload_base64` carries any payload.
    func render(_ delivery: Delivery) -> [UInt8] {
        var out: [UInt8] = []
        render(delivery, into: &out)
        return out
    }

    /// The JSON object of a delivery: topic, seq, time (RFC 3339), uid, pid, unit, host (null for
    /// this host's own messages), and the payload as a string when
    /// it is UTF-8, else as base64 in `payload_base64`.
    static func json(_ delivery: Delivery) -> String {
        var json = JSONTextWriter()
        json.beginObject()
        json.field("topic", delivery.topic.name)
        json.field("seq", delivery.sequence)
        json.field("time", delivery.time.rfc3339)
        json.field("uid", UInt64(delivery.publisher.uid))
        json.key("pid")
        json.number(Int64(delivery.publisher.pid))
        json.field("unit", delivery.publisher.unit)
        json.field("host", delivery.publisher.host)
        if let text = delivery.text {
            json.field("payload", text)
        } else {
            json.field("payload_base64", Base64.encode(delivery.bytes))
        }
        json.endObject()
        return json.text
    }

    /// A drop notice as a JSON record: `{"dropped":{"topic":…,"count":…,"first_seq":…,"last_seq":…,"reason":…}}`
    /// (`reason` null from a daemon that does not say).
    static func json(_ notice: DropNotice) -> String {
        var json = JSONTextWriter()
        json.beginObject()
        json.key("dropped")
        json.beginObject()
        json.field("topic", notice.topic.name)
        json.field("count", notice.count)
        json.field("first_seq", notice.firstSequence)
        json.field("last_seq", notice.lastSequence)
        json.field("reason", notice.reason?.rawValue)
        json.endObject()
        json.endObject()
        return json.text
    }

    /// A drop notice for people.
    static func sentence(_ notice: DropNotice) -> String {
        let messages = "\(notice.count) message\(notice.count == 1 ? "" : "s")"
        if notice.isAboutManyTopics {
            switch notice.reason {
            case .history?:
                return "\(messages) of other topics are missing: their histories no longer hold them"
            case .forgotten?:
                return "\(messages) of topics the daemon forgot to make room (max-topics) may be missing"
            case .fleet?:
                return "\(messages) of other hosts were lost before this host could take them in (older than the fleet's log keeps, or not handed over)"
            default:
                return "the daemon dropped \(messages) of other topics too because this subscriber fell behind on more topics than it keeps a notice for each"
            }
        }
        let range = notice.firstSequence == notice.lastSequence
            ? "sequence \(notice.firstSequence)" : "sequence \(notice.firstSequence) to \(notice.lastSequence)"
        switch notice.reason {
        case .history?:
            return "\(messages) of \(notice.topic.name) (\(range)) are missing: the topic's history no longer holds them"
        case .forgotten?:
            return "\(messages) of \(notice.topic.name) (\(range)) are missing: the daemon forgot the topic to make room (max-topics)"
        case .fleet?:
            return "\(messages) of \(notice.topic.name) (\(range)) were lost before this host could take them in from other hosts"
        default:
            return "the daemon dropped \(messages) of \(notice.topic.name) (\(range)) because this subscriber fell behind"
        }
    }
}

/// How a list or table is printed.
enum TableFormat: String, ExpressibleByArgument, CaseIterable {
    /// Aligned columns for people.
    case table
    /// One JSON document for programs.
    case json
}

/// Left-aligned columns separated by two spaces.
func renderTable(_ rows: [[String]]) -> String {
    guard let header = rows.first else { return "" }
    var widths = header.map(\.count)
    for row in rows {
        for (column, cell) in row.enumerated() { widths[column] = max(widths[column], cell.count) }
    }
    var out = ""
    for row in rows {
        var line = ""
        for (column, cell) in row.enumerated() {
            line += column == row.count - 1 ? cell : cell + String(repeating: " ", count: widths[column] - cell.count + 2)
        }
        out += line + "\n"
    }
    return out
}
