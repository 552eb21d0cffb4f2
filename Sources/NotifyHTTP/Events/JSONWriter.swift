import NIOCore
import NotifyProtocol

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
        buffer.appendJSONString(value)
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
        buffer.appendJSONString(bytes)
    }
}
