import NIOCore

/// Writes the gateway's JSON objects straight into a buffer: one per event, so no `Encodable` value, dictionary or
/// string is made per message on a stream's way out.
struct JSONWriter {
    private var buffer = ByteBuffer()
    private var first = true

    /// Writes one object at the end of `buffer`, its fields written by `body`. The buffer is moved into the writer
    /// and back, never shared, so appending to it copies nothing.
    static func object(into buffer: inout ByteBuffer, _ body: (inout JSONWriter) -> Void) {
        var writer = JSONWriter()
        swap(&writer.buffer, &buffer)
        writer.buffer.writeStaticString("{")
        body(&writer)
        writer.buffer.writeStaticString("}")
        swap(&writer.buffer, &buffer)
    }

    private mutating func key(_ key: StaticString) {
        if !first { buffer.writeStaticString(",") }
        first = false
        buffer.writeStaticString("\"")
        buffer.writeStaticString(key)
        buffer.writeStaticString("\":")
    }

    mutating func field(_ key: StaticString, _ value: UInt64) {
        self.key(key)
        // No string made for a number: a message event has half a dozen, and one each was an allocation apiece.
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: 20) { room in
            var out = RawJSON(base: room.baseAddress!)
            out.decimal(value)
            return out.count
        }
    }

    mutating func field(_ key: StaticString, _ value: String) {
        self.key(key)
        var value = value
        value.withUTF8 { JSONWriter.writeQuoted(UnsafeRawBufferPointer($0), into: &buffer) }
    }

    /// A message id as a string field.
    mutating func field(_ key: StaticString, id: MessageID) {
        self.key(key)
        buffer.writeStaticString("\"")
        id.write(into: &buffer)
        buffer.writeStaticString("\"")
    }

    /// A string field from bytes that are valid UTF-8.
    mutating func field(_ key: StaticString, utf8 bytes: UnsafeRawBufferPointer) {
        self.key(key)
        JSONWriter.writeQuoted(bytes, into: &buffer)
    }

    /// Writes `bytes` (valid UTF-8) as a JSON string: quotes, and the escapes JSON needs (`"`, `\`, and the control
    /// characters), runs without any copied at once.
    static func writeQuoted(_ bytes: UnsafeRawBufferPointer, into buffer: inout ByteBuffer) {
        buffer.writeStaticString("\"")
        var runStart = 0
        for index in bytes.indices {
            let byte = bytes[index]
            guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
            buffer.writeBytes(UnsafeRawBufferPointer(rebasing: bytes[runStart..<index]))
            switch byte {
            case UInt8(ascii: "\""): buffer.writeStaticString("\\\"")
            case UInt8(ascii: "\\"): buffer.writeStaticString("\\\\")
            case UInt8(ascii: "\n"): buffer.writeStaticString("\\n")
            case UInt8(ascii: "\r"): buffer.writeStaticString("\\r")
            case UInt8(ascii: "\t"): buffer.writeStaticString("\\t")
            default:
                let hex: [UInt8] = Array("0123456789abcdef".utf8)
                buffer.writeStaticString("\\u00")
                buffer.writeInteger(hex[Int(byte >> 4)])
                buffer.writeInteger(hex[Int(byte & 0xF)])
            }
            runStart = index + 1
        }
        buffer.writeBytes(UnsafeRawBufferPointer(rebasing: bytes[runStart...]))
        buffer.writeStaticString("\"")
    }
}
