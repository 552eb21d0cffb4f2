/// Builds one JSON document by hand: the CLI prints a handful of flat objects, and this keeps Foundation's
/// encoders (and their start-up cost) out of `notify`.
struct JSONWriter {
    private(set) var text = ""
    private var needsComma = false

    mutating func beginObject() { separate(); text += "{"; needsComma = false }
    mutating func endObject() { text += "}"; needsComma = true }
    mutating func beginArray() { separate(); text += "["; needsComma = false }
    mutating func endArray() { text += "]"; needsComma = true }

    mutating func key(_ name: String) {
        separate()
        JSONWriter.appendString(name, to: &text)
        text += ":"
        needsComma = false
    }

    mutating func string(_ value: String) { separate(); JSONWriter.appendString(value, to: &text); needsComma = true }
    mutating func number(_ value: UInt64) { separate(); text += String(value); needsComma = true }
    mutating func number(_ value: Int64) { separate(); text += String(value); needsComma = true }
    mutating func null() { separate(); text += "null"; needsComma = true }
    mutating func boolean(_ value: Bool) { separate(); text += value ? "true" : "false"; needsComma = true }

    /// Writes `value` with `decimals` digits after the point (`null` when it is not finite).
    mutating func number(_ value: Double, decimals: Int) {
        separate()
        text += value.isFinite ? NumberText.fixed(value, decimals: decimals) : "null"
        needsComma = true
    }

    mutating func field(_ name: String, _ value: String) { key(name); string(value) }
    mutating func field(_ name: String, _ value: UInt64) { key(name); number(value) }
    mutating func field(_ name: String, _ value: String?) {
        key(name)
        if let value { string(value) } else { null() }
    }
    mutating func field(_ name: String, _ value: UInt64?) {
        key(name)
        if let value { number(value) } else { null() }
    }
    mutating func field(_ name: String, _ value: Bool) { key(name); boolean(value) }
    mutating func field(_ name: String, _ value: Double?, decimals: Int) {
        key(name)
        if let value { number(value, decimals: decimals) } else { null() }
    }

    private mutating func separate() {
        if needsComma { text += "," }
    }

    /// Appends `value` as a JSON string: quotes, backslashes and control characters escaped, the rest as is.
    static func appendString(_ value: String, to text: inout String) {
        text += "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": text += "\\\""
            case "\\": text += "\\\\"
            case "\n": text += "\\n"
            case "\r": text += "\\r"
            case "\t": text += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F:
                let hex = String(scalar.value, radix: 16)
                text += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: text.unicodeScalars.append(scalar)
            }
        }
        text += "\""
    }
}

/// Standard base64 (RFC 4648, with padding), for payloads that are not UTF-8 text.
enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index + 3 <= bytes.count {
            let chunk = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
            for shift in [18, 12, 6, 0] { out.append(alphabet[Int(chunk >> UInt32(shift) & 63)]) }
            index += 3
        }
        let rest = bytes.count - index
        if rest > 0 {
            var chunk = UInt32(bytes[index]) << 16
            if rest == 2 { chunk |= UInt32(bytes[index + 1]) << 8 }
            out.append(alphabet[Int(chunk >> 18 & 63)])
            out.append(alphabet[Int(chunk >> 12 & 63)])
            out.append(rest == 2 ? alphabet[Int(chunk >> 6 & 63)] : UInt8(ascii: "="))
            out.append(UInt8(ascii: "="))
        }
        return String(decoding: out, as: UTF8.self)
    }
}
