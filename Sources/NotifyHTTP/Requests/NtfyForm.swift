import Foundation
import HTTPTypes
import Hummingbird

/// ntfy's publish forms as the gateway reads them: where a message may come from besides the body (its headers and
/// query parameters, whose names ntfy takes in several spellings), and the fields ntfy keeps beside a message.
///
/// A notifyd message is its payload alone: a title, tags, a priority other than the default, a link to open, … would
/// be lost on the way to every reader, so a publish that gives one is refused with a 400 that names it, never taken
/// with the field dropped.
enum NtfyForm {
    /// One of ntfy's fields, with the header and query names it is given by.
    struct Field: Sendable {
        /// How the refusal names it.
        let name: String
        let headers: [String]
        let parameters: [String]
        /// The values that change nothing (a priority of 3 is ntfy's default), lowercased.
        var neutral: Set<String> = []
    }

    /// The message given apart from the body.
    static let message = Field(name: "message", headers: ["X-Message", "Message", "m"], parameters: ["message", "m"])

    /// ntfy's fields that a notifyd message cannot carry.
    static let unkept: [Field] = [
        Field(name: "title", headers: ["X-Title", "Title", "t"], parameters: ["title", "t"]),
        Field(name: "priority", headers: ["X-Priority", "Priority", "prio", "p"], parameters: ["priority", "prio", "p"], neutral: ["3", "default"]),
        Field(name: "tags", headers: ["X-Tags", "Tags", "Tag", "ta"], parameters: ["tags", "tag", "ta"]),
        Field(name: "click", headers: ["X-Click", "Click"], parameters: ["click"]),
        Field(name: "attach", headers: ["X-Attach", "Attach", "a"], parameters: ["attach", "a"]),
        Field(name: "filename", headers: ["X-Filename", "Filename", "file", "f"], parameters: ["filename", "file", "f"]),
        Field(name: "icon", headers: ["X-Icon", "Icon"], parameters: ["icon"]),
        Field(name: "actions", headers: ["X-Actions", "Actions", "Action"], parameters: ["actions", "action"]),
        Field(name: "markdown", headers: ["X-Markdown", "Markdown", "md"], parameters: ["markdown", "md"], neutral: ["no", "false", "0"]),
        Field(name: "delay", headers: ["X-Delay", "Delay", "X-At", "At", "X-In", "In"], parameters: ["delay", "at", "in"]),
        Field(name: "email", headers: ["X-Email", "X-E-Mail", "Email", "E-Mail", "mail", "e"], parameters: ["email", "mail", "e"]),
        Field(name: "call", headers: ["X-Call", "Call"], parameters: ["call"]),
    ]

    /// The JSON form's keys the gateway reads; any other is one of ``unkept`` or unknown, and refused.
    static let jsonKeys: Set<String> = ["topic", "message", "priority"]

    /// The values `field` has in `request`'s headers and query, each with the spelling that gave it.
    static func values(of field: Field, in request: Request) throws(GatewayError) -> [(spelling: String, value: String)] {
        var found: [(spelling: String, value: String)] = []
        for name in field.headers {
            if let fieldName = HTTPField.Name(name), let value = request.headers[fieldName] {
                found.append((name, try decodeHeader(value, naming: name)))
            }
        }
        // Read from the query as sent: a form's encoding writes a space as `+` (and a `+` as %2B), as ntfy reads it,
        // so `+` is a space before the percent-decoding, not after.
        let pairs = (request.uri.query ?? "").split(separator: "&").map { $0.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false) }
        for name in field.parameters {
            for pair in pairs where pair.first.map({ $0 == name[...] }) ?? false {
                let raw = pair.count > 1 ? pair[1].replacingOccurrences(of: "+", with: " ") : ""
                guard let value = raw.removingPercentEncoding else {
                    throw GatewayError(.badRequest, "?\(name)= is not percent-encoded correctly")
                }
                found.append(("?\(name)=", value))
            }
        }
        return found
    }

    /// The one value `field` has in `request`, if any; two that differ (`X-Message: a` and `?m=b`) are a 400, since
    /// taking one would drop the other without a word.
    static func value(of field: Field, in request: Request) throws(GatewayError) -> (spelling: String, value: String)? {
        let found = try values(of: field, in: request)
        if let first = found.first, let other = found.first(where: { $0.value != first.value }) {
            throw GatewayError(.badRequest, "the \(field.name) came both in \(first.spelling) and in \(other.spelling), and they differ; send it once")
        }
        return found.first
    }

    /// Refuses `request` if it gives a field of ``unkept`` (other than a neutral value), in any of its spellings.
    static func refuseUnkept(in request: Request) throws(GatewayError) {
        for field in unkept {
            for (spelling, value) in try values(of: field, in: request) where !field.neutral.contains(value.lowercased()) {
                // HTTP's own Priority header (RFC 9218: `u=4, i`), which browsers and proxies send, is not ntfy's.
                if spelling == "Priority", value.hasPrefix("u=") || value == "i" { continue }
                throw refusal(field.name, spelling: spelling)
            }
        }
    }

    /// Refuses a JSON form that gives a field it cannot keep, or one it does not know.
    static func refuseUnkept(in object: [String: Any]) throws(GatewayError) {
        for key in object.keys.sorted() where !jsonKeys.contains(key) {
            throw refusal(key, spelling: "\"\(key.prefix(40))\"")
        }
        if let priority = object["priority"], "\(priority)" != "3" {
            throw refusal("priority", spelling: "\"priority\"")
        }
    }

    static func refusal(_ name: String, spelling: String) -> GatewayError {
        GatewayError(
            .badRequest,
            "\(spelling) gives ntfy's \(name.prefix(40)), which a notifyd message cannot carry (it is its payload alone): it would be lost on the way to every reader; publish without it, or put it in the message"
        )
    }

    /// A header's value, with RFC 2047's encoded words (`=?UTF-8?B?…?=`, `=?UTF-8?Q?…?=`) decoded, as ntfy does for
    /// text that is not ASCII.
    static func decodeHeader(_ value: String, naming name: String) throws(GatewayError) -> String {
        guard value.hasPrefix("=?"), value.hasSuffix("?=") else { return value }
        var decoded = ""
        for word in value.split(whereSeparator: { $0 == " " || $0 == "\t" }) {
            let parts = word.dropFirst(2).dropLast(2).split(separator: "?", maxSplits: 2, omittingEmptySubsequences: false)
            guard word.hasPrefix("=?"), word.hasSuffix("?="), parts.count == 3,
                ["utf-8", "us-ascii"].contains(parts[0].lowercased())
            else {
                throw GatewayError(.badRequest, "\(name): \(value.prefix(60)) is not an encoded word this gateway reads (=?UTF-8?B?…?= or =?UTF-8?Q?…?=)")
            }
            var bytes: [UInt8]?
            switch parts[1].uppercased() {
            case "B":
                var text = String(parts[2])
                while text.count % 4 != 0 { text += "=" }
                bytes = Data(base64Encoded: text).map { Array($0) }
            case "Q":
                bytes = quotedPrintable(parts[2])
            default:
                bytes = nil
            }
            guard let bytes, let text = String(validating: bytes, as: UTF8.self) else {
                throw GatewayError(.badRequest, "\(name): \(value.prefix(60)) does not decode to UTF-8 text")
            }
            decoded += text
        }
        return decoded
    }

    /// RFC 2047's Q encoding: `_` a space, `=XX` a byte.
    private static func quotedPrintable(_ text: Substring) -> [UInt8]? {
        var bytes: [UInt8] = []
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            switch byte {
            case UInt8(ascii: "_"): bytes.append(UInt8(ascii: " "))
            case UInt8(ascii: "="):
                guard let high = iterator.next(), let low = iterator.next(),
                    let value = UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16)
                else { return nil }
                bytes.append(value)
            default: bytes.append(byte)
            }
        }
        return bytes
    }
}
