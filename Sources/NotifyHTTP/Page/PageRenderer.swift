import NIOCore
import NotifyBus

/// The page at `/`: the host's topics with their latest messages, written on the server so that the list reads
/// without JavaScript; the script then keeps it live.
enum PageRenderer {
    /// The page for `filter` (a pattern, or several comma-separated), listing `latest`: each topic's buffered message;
    /// its links carry `auth` (the page's own `?auth=`), so that they work where the page did.
    static func page(filter: String, latest: [Delivery], error: String?, auth: String? = nil) -> String {
        let authQuery = auth.map { "&auth=" + pathSegment($0) } ?? ""
        var html = """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
            <title>notifyd: \(escape(filter))</title><style>\(PageAssets.style)</style></head>
            <body data-filter="\(escape(filter))">
            <h1>notifyd topics</h1>
            <form method="get" action="/"><label>Pattern <input type="text" name="filter" value="\(escape(filter))"></label>
            <button type="submit">Show</button> <span class="status" id="status"></span></form>

            """
        if let error { html += "<p class=\"status\">\(escape(error))</p>\n" }
        html += "<table><thead><tr><th>Topic</th><th>Latest</th><th>Seq</th><th>Time (UTC)</th><th>Unit</th><th>Msg/s</th></tr></thead><tbody id=\"topics\">\n"
        for delivery in latest.sorted(by: { $0.topic.name < $1.topic.name }) {
            let value = delivery.text.map { $0.count > 80 ? String($0.prefix(79)) + "…" : $0 } ?? "(\(delivery.payload.readableBytes) bytes, not text)"
            html += "<tr data-topic=\"\(escape(delivery.topic.name))\"><td class=\"topic\"><a href=\"/\(escape(pathSegment(delivery.topic.name)))/raw?since=all\(escape(authQuery))\">"
            html += "\(escape(delivery.topic.name))</a></td><td class=\"value\">\(escape(value))</td><td class=\"seq num\">\(delivery.sequence)</td>"
            html += "<td class=\"time\">\(time(delivery.time))</td><td class=\"unit\">\(escape(delivery.publisher.unit ?? ""))</td><td class=\"rate num\"></td></tr>\n"
        }
        html += """
            </tbody></table>
            <section id="tail" hidden><h2></h2><pre></pre></section>
            <script>\(PageAssets.script)</script>
            </body></html>

            """
        return html
    }

    /// `name` as one segment of a path: every byte but letters, digits and `-._~` percent-encoded, so that a topic
    /// named `/evil.example` links to `/%2Fevil.example/…` on this gateway, not to `//evil.example/…`, another site.
    static func pathSegment(_ name: String) -> String {
        var segment = ""
        for byte in name.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                segment.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = Array("0123456789ABCDEF".unicodeScalars)
                segment.unicodeScalars.append("%")
                segment.unicodeScalars.append(hex[Int(byte >> 4)])
                segment.unicodeScalars.append(hex[Int(byte & 0xF)])
            }
        }
        return segment
    }

    /// `text` safe inside HTML text and attribute values.
    static func escape(_ text: String) -> String {
        var escaped = ""
        escaped.reserveCapacity(text.utf8.count)
        for character in text {
            switch character {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "\"": escaped += "&quot;"
            case "'": escaped += "&#39;"
            default: escaped.append(character)
            }
        }
        return escaped
    }

    /// A publish time as `YYYY-MM-DD hh:mm:ss.mmm`, UTC: its RFC 3339 form (one date routine, PublishTime's) cut
    /// to milliseconds, a space for the `T`.
    static func time(_ time: PublishTime) -> String {
        let text = time.rfc3339  // 2026-11-22T09:30:00.123456Z
        guard let t = text.firstIndex(of: "T") else { return text }
        return text[..<t] + " " + text[text.index(after: t)...].prefix(12)
    }
}
