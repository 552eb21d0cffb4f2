import NotifyProtocol

/// SipHash-2-4 (Aumasson and Bernstein): a keyed hash whose output nobody can predict without the key. The state
/// log seals its records with it, so that a record a client writes into a message's payload, byte for byte, can
/// never pass for one the daemon wrote: the client does not know the key.
///
/// The message is one 64-bit word followed by bytes, which is all the log needs (the word carries a record's kind
/// and length) and keeps the hash a single pass with no buffering.
struct SipHash {
    let k0: UInt64
    let k1: UInt64

    /// The 64-bit hash of `word` (as 8 little-endian bytes) followed by `bytes`.
    func hash(word: UInt64, _ bytes: UnsafeRawBufferPointer) -> UInt64 {
        var state = State(k0: k0, k1: k1)
        state.compress(word)
        let count = bytes.count
        var offset = 0
        if let base = bytes.baseAddress {
            while count - offset >= 8 {
                state.compress(UInt64(littleEndian: base.loadUnaligned(fromByteOffset: offset, as: UInt64.self)))
                offset += 8
            }
        }
        // The last block: the bytes left over, and the message's length (mod 256) in the top byte.
        var last = UInt64(truncatingIfNeeded: 8 + count) << 56
        var shift: UInt64 = 0
        while offset < count {
            last |= UInt64(bytes[offset]) << shift
            shift += 8
            offset += 1
        }
        state.compress(last)
        return state.finalize()
    }

    /// The hash of `word` alone.
    func hash(word: UInt64) -> UInt64 {
        hash(word: word, UnsafeRawBufferPointer(start: nil, count: 0))
    }

    private struct State {
        var v0: UInt64, v1: UInt64, v2: UInt64, v3: UInt64

        init(k0: UInt64, k1: UInt64) {
            v0 = k0 ^ 0x736f_6d65_7073_6575
            v1 = k1 ^ 0x646f_7261_6e64_6f6d
            v2 = k0 ^ 0x6c79_6765_6e65_7261
            v3 = k1 ^ 0x7465_6462_7974_6573
        }

        mutating func round() {
            v0 &+= v1
            v1 = v1.rotatedLeft(13) ^ v0
            v0 = v0.rotatedLeft(32)
            v2 &+= v3
            v3 = v3.rotatedLeft(16) ^ v2
            v0 &+= v3
            v3 = v3.rotatedLeft(21) ^ v0
            v2 &+= v1
            v1 = v1.rotatedLeft(17) ^ v2
            v2 = v2.rotatedLeft(32)
        }

        mutating func compress(_ block: UInt64) {
            v3 ^= block
            round()
            round()
            v0 ^= block
        }

        mutating func finalize() -> UInt64 {
            v2 ^= 0xFF
            round()
            round()
            round()
            round()
            return v0 ^ v1 ^ v2 ^ v3
        }
    }
}

extension UInt64 {
    fileprivate func rotatedLeft(_ count: UInt64) -> UInt64 {
        (self << count) | (self >> (64 - count))
    }
}
