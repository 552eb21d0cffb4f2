public import NIOCore

/// Where JSON text is written: the one JSON string escaper (``JSONOutput/appendJSONString(_:)``) writes into any of
/// them, so `notify --json`, the HTTP gateway's events and its hot message path escape alike.
package protocol JSONOutput {
    /// Appends `bytes` as they are.
    mutating func appendJSONBytes(_ bytes: UnsafeRawBufferPointer)
    /// Appends one ASCII byte.
    mutating func appendJSONByte(_ byte: UInt8)
}

extension JSONOutput {
    /// Appends `bytes` (valid UTF-8) as a JSON string: in quotes, with `"` and `\` escaped, `\n`, `\r` and `\t` by
    /// name, and the other control characters (C0 and DEL) as `\u00XX`; the rest as it is, a run at a time.
    @inlinable
    package mutating func appendJSONString(_ bytes: UnsafeRawBufferPointer) {
        appendJSONByte(UInt8(ascii: "\""))
        var runStart = 0
        for index in bytes.indices {
            let byte = bytes[index]
            guard byte < 0x20 || byte == 0x7F || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
            if runStart < index { appendJSONBytes(UnsafeRawBufferPointer(rebasing: bytes[runStart..<index])) }
            runStart = index + 1
            appendJSONByte(UInt8(ascii: "\\"))
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"): appendJSONByte(byte)
            case UInt8(ascii: "\n"): appendJSONByte(UInt8(ascii: "n"))
            case UInt8(ascii: "\r"): appendJSONByte(UInt8(ascii: "r"))
            case UInt8(ascii: "\t"): appendJSONByte(UInt8(ascii: "t"))
            default:
                let hex: StaticString = "0123456789abcdef"
                appendJSONByte(UInt8(ascii: "u"))
                appendJSONByte(UInt8(ascii: "0"))
                appendJSONByte(UInt8(ascii: "0"))
                appendJSONByte(hex.utf8Start[Int(byte >> 4)])
                appendJSONByte(hex.utf8Start[Int(byte & 0xF)])
            }
        }
        if runStart < bytes.count { appendJSONBytes(UnsafeRawBufferPointer(rebasing: bytes[runStart...])) }
        appendJSONByte(UInt8(ascii: "\""))
    }

    /// Appends `text` as a JSON string, as ``appendJSONString(_:)`` writes its UTF-8.
    @inlinable
    package mutating func appendJSONString(_ text: String) {
        var text = text
        text.withUTF8 { appendJSONString(UnsafeRawBufferPointer($0)) }
    }
}

extension [UInt8]: JSONOutput {
    @inlinable
    package mutating func appendJSONBytes(_ bytes: UnsafeRawBufferPointer) { append(contentsOf: bytes) }
    @inlinable
    package mutating func appendJSONByte(_ byte: UInt8) { append(byte) }
}

extension ByteBuffer: JSONOutput {
    @inlinable
    package mutating func appendJSONBytes(_ bytes: UnsafeRawBufferPointer) { writeBytes(bytes) }
    @inlinable
    package mutating func appendJSONByte(_ byte: UInt8) { writeInteger(byte) }
}

extension String: JSONOutput {
    @inlinable
    package mutating func appendJSONBytes(_ bytes: UnsafeRawBufferPointer) { self += String(decoding: bytes, as: UTF8.self) }
    @inlinable
    package mutating func appendJSONByte(_ byte: UInt8) { unicodeScalars.append(Unicode.Scalar(byte)) }
}
