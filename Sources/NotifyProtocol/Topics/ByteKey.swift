/// A `String` compared and hashed by its UTF-8 bytes.
///
/// Swift compares strings by Unicode canonical equivalence, so `"caf\u{E9}"` equals `"cafe\u{301}"`. Topic names
/// are identifiers on the wire and must compare byte for byte, as in MQTT and NATS: what a subscriber asked for is
/// exactly what it gets.
///
/// It wraps a whole `String`, not a `Substring`: native strings hand out their contiguous UTF-8 without
/// retain/release traffic, which made `Substring` keys take 60% longer to look up. Tokens of up to 15 bytes become
/// small strings, which need no allocation.
@usableFromInline
package struct ByteKey: Hashable {
    @usableFromInline package let text: String

    @inlinable package init(_ text: String) { self.text = text }
    @inlinable package init(_ text: Substring) { self.text = String(text) }

    @inlinable
    package static func == (lhs: ByteKey, rhs: ByteKey) -> Bool {
        sameBytes(lhs.text, rhs.text)
    }

    @inlinable
    package func hash(into hasher: inout Hasher) {
        let hashed: Void? = text.utf8.withContiguousStorageIfAvailable { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        if hashed == nil {
            for byte in text.utf8 { hasher.combine(byte) }
        }
    }

    /// Whether two strings have the same UTF-8 bytes.
    @inlinable
    package static func sameBytes(_ lhs: String, _ rhs: String) -> Bool {
        // The same string (one storage, or the same small string) is the same bytes: a decoder that hands the last
        // topic again makes this the common case.
        if MemoryLayout<String>.size == 16,
            unsafeBitCast(lhs, to: (UInt64, UInt64).self) == unsafeBitCast(rhs, to: (UInt64, UInt64).self)
        {
            return true
        }
        let count = lhs.utf8.count
        guard count == rhs.utf8.count else { return false }
        let compared = lhs.utf8.withContiguousStorageIfAvailable { left in
            rhs.utf8.withContiguousStorageIfAvailable { right in
                equalBytes(UnsafeRawBufferPointer(left), UnsafeRawBufferPointer(right))
            }
        }
        return (compared ?? nil) ?? lhs.utf8.elementsEqual(rhs.utf8)
    }

    /// Compares two buffers of the same length eight bytes at a time; topic names are short, so this beats a call
    /// to `memcmp` and needs no C library in inlinable code.
    @inlinable
    package static func equalBytes(_ left: UnsafeRawBufferPointer, _ right: UnsafeRawBufferPointer) -> Bool {
        let count = left.count
        var offset = 0
        while offset + 8 <= count {
            if left.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
                != right.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            {
                return false
            }
            offset += 8
        }
        while offset < count {
            if left[offset] != right[offset] { return false }
            offset += 1
        }
        return true
    }
}

extension String {
    /// Byte-wise equality, the identity of topic names (see ``ByteKey``).
    @inlinable
    package func sameBytes(as other: String) -> Bool { ByteKey.sameBytes(self, other) }

    /// Whether the string's UTF-8 is exactly `bytes`, compared without making a string of them.
    package func hasBytes(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var text = self
        return text.withUTF8 { utf8 in
            utf8.count == bytes.count && ByteKey.equalBytes(UnsafeRawBufferPointer(utf8), bytes)
        }
    }
}
