import NotifyProtocol

/// Builds one JSON document by hand: the CLI prints a handful of flat objects, and this keeps Foundation's
/// encoders (and their start-up cost) out of `notify`.
struct JSONTextWriter {
    private(set) var text = ""
    private var needsComma = false

    mutating func beginObject() { separate(); text += "{"; needsComma = false }
    mutating func endObject() { text += "}"; needsComma = true }
    mutating func beginArray() { separate(); text += "["; needsComma = false }
    mutating func endArray() { text += "]"; needsComma = true }

    mutating func key(_ name: String) {
        separate()
        text.appendJSONString(name)
        text += ":"
        needsComma = false
    }

    mutating func string(_ value: String) { separate(); text.appendJSONString(value); needsComma = true }
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
}
