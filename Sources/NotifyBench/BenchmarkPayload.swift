import NotifyBus
/// The payload of every benchmark message: a 16-byte header, then filler.
///
/// The header is the publisher's numbering (8 bytes) and when the message was stamped (8 bytes, nanoseconds on the
/// benchmark's monotonic clock), both little-endian, as in the C harness in `shared/anchors` (whose method
/// `notify bench` follows). The numbering names the publisher in its top 16 bits and counts that publisher's
/// messages from 0 in the low 48, so a subscriber can check the order of each publisher's messages on its own: the
/// daemon keeps the order of one connection's publishes, not an order across connections.
public enum BenchmarkPayload {
    /// The bytes of the header; the smallest payload a benchmark sends.
    public static let headerSize = 16
    /// The byte the rest of the payload is filled with.
    static let filler = UInt8(ascii: "x")
    /// The most publishers the numbering can tell apart.
    public static let maxPublishers = 1 << 16
    private static let sequenceBits: UInt64 = 48
    private static let sequenceMask: UInt64 = (1 << 48) - 1

    /// The 8-byte numbering of message `sequence` of publisher `publisher`.
    public static func numbering(publisher: Int, sequence: UInt64) -> UInt64 {
        UInt64(publisher) << sequenceBits | (sequence & sequenceMask)
    }

    /// The publisher and the sequence number that `numbering` holds.
    public static func split(_ numbering: UInt64) -> (publisher: Int, sequence: UInt64) {
        (Int(numbering >> sequenceBits), numbering & sequenceMask)
    }

    /// A payload of `size` bytes (at least ``headerSize``) with the given header.
    public static func make(size: Int, numbering: UInt64, stamp: UInt64) -> [UInt8] {
        var payload = [UInt8](repeating: filler, count: max(size, headerSize))
        payload.withUnsafeMutableBytes { stampHeader($0.baseAddress!, numbering: numbering, stamp: stamp) }
        return payload
    }

    /// Writes the header at `header`, the first byte of a payload.
    @inline(__always)
    static func stampHeader(_ header: UnsafeMutableRawPointer, numbering: UInt64, stamp: UInt64) {
        header.storeBytes(of: numbering.littleEndian, as: UInt64.self)
        (header + 8).storeBytes(of: stamp.littleEndian, as: UInt64.self)
    }

    /// The numbering in the header at `header` (which need not be aligned).
    @inline(__always)
    static func readNumbering(_ header: UnsafeRawPointer) -> UInt64 {
        UInt64(littleEndian: header.loadUnaligned(as: UInt64.self))
    }
}
