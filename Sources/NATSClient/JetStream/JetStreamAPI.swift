public import NIOCore

/// The requests of the JetStream API (`$JS.API.…`) the bridge needs, made over a core connection as request/reply
/// with JSON bodies, as the NATS documentation ("JetStream wire API reference") describes them.
///
/// JSON is written and read by hand: the few fields used are flat, and the daemon does without Foundation.
public struct JetStreamAPI: Sendable {
    let connection: NATSConnection

    public init(_ connection: NATSConnection) {
        self.connection = connection
    }

    /// Sends `body` to `$JS.API.<api>` and returns the reply's JSON, or throws the error it holds.
    public func request(_ api: String, body: String, timeout: TimeAmount = .seconds(5)) async throws -> String {
        let reply: NATSMessage
        do {
            reply = try await connection.request(ByteBuffer(string: body), to: "$JS.API." + api, timeout: timeout)
        } catch let error as NATSError where error.description.hasPrefix("no responders") {
            throw JetStreamError(code: 0, description: "JetStream is not enabled on this NATS server")
        }
        let json = String(buffer: reply.payload)
        if json.contains(#""error":"#) {
            throw JetStreamError(
                code: JSONScan.integer("err_code", in: json) ?? 0,
                description: JSONScan.string("description", in: json) ?? json
            )
        }
        return json
    }
}

/// An error the JetStream API answered with (`{"error":{"code":…,"err_code":…,"description":…}}`).
public struct JetStreamError: Error, Sendable, CustomStringConvertible {
    /// JetStream's own error code (`err_code`), such as 10058: a stream of that name exists with another configuration.
    public let code: Int
    public let description: String

    public init(code: Int, description: String) {
        self.code = code
        self.description = description
    }
}

/// Reads a flat field of a JSON object by its key: enough for the API replies' numbers and sentences.
public enum JSONScan {
    /// The first number after `"key":`.
    public static func integer(_ key: String, in json: String) -> Int? {
        guard let start = valueStart(key, in: json) else { return nil }
        let digits = json.utf8[start...].prefix { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || $0 == UInt8(ascii: "-") }
        return Int(String(decoding: digits, as: UTF8.self))
    }

    /// The first `true` or `false` after `"key":`.
    public static func boolean(_ key: String, in json: String) -> Bool? {
        guard let start = valueStart(key, in: json) else { return nil }
        let rest = json.utf8[start...]
        if rest.starts(with: "true".utf8) { return true }
        if rest.starts(with: "false".utf8) { return false }
        return nil
    }

    /// The first string after `"key":`, its escapes undone: `\"`, `\\`, `\/` and `\uXXXX` (Go writes `<`, `>` and
    /// `&` as `\u003c`, `\u003e`, `\u0026`; a subject's `>` comes back so).
    public static func string(_ key: String, in json: String) -> String? {
        guard let start = valueStart(key, in: json), json.utf8[start] == UInt8(ascii: "\"") else { return nil }
        var text: [UInt8] = []
        var index = json.utf8.index(after: start)
        var escaped = false
        while index < json.utf8.endIndex {
            let byte = json.utf8[index]
            if escaped, byte == UInt8(ascii: "u"), let end = json.utf8.index(index, offsetBy: 5, limitedBy: json.utf8.endIndex),
                let scalar = UInt32(String(decoding: json.utf8[json.utf8.index(after: index)..<end], as: UTF8.self), radix: 16)
                    .flatMap(Unicode.Scalar.init)
            {
                text.append(contentsOf: Array(String(Character(scalar)).utf8))
                escaped = false
                index = end
                continue
            }
            if escaped {
                text.append(byte)
                escaped = false
            } else if byte == UInt8(ascii: "\\") {
                escaped = true
            } else if byte == UInt8(ascii: "\"") {
                return String(decoding: text, as: UTF8.self)
            } else {
                text.append(byte)
            }
            index = json.utf8.index(after: index)
        }
        return nil
    }

    private static func valueStart(_ key: String, in json: String) -> String.UTF8View.Index? {
        let needle = Array("\"\(key)\":".utf8)
        let bytes = json.utf8
        var start = bytes.startIndex
        var found: String.UTF8View.Index?
        while start < bytes.endIndex {
            guard let first = bytes[start...].firstIndex(of: needle[0]) else { break }
            if bytes[first...].starts(with: needle) {
                found = bytes.index(first, offsetBy: needle.count)
                break
            }
            start = bytes.index(after: first)
        }
        guard var index = found else { return nil }
        while index < json.utf8.endIndex, json.utf8[index] == UInt8(ascii: " ") { index = json.utf8.index(after: index) }
        return index < json.utf8.endIndex ? index : nil
    }

    /// `text` as a JSON string, quotes included.
    public static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 {
                    out += "\\u00" + (scalar.value < 0x10 ? "0" : "") + String(scalar.value, radix: 16)
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }
}
