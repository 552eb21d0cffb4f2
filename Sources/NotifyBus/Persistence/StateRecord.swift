import NIOCore

/// One record of the state log, and its bytes on disk:
///
/// ```
/// offset 0  u8     0xA5, the record marker (lets a reader find the next record after damage)
///        1  u8     kind: 1 retained message, 2 sequence, 3 cleared
///        2  u32 LE length of the body
///        6  u32 LE CRC-32 of the kind byte and the body
///       10  body   retained: the MSG frame as delivered
///                  sequence: u64 LE sequence number, then the topic
///                  cleared:  the topic
/// ```
enum StateRecord: Equatable {
    /// A topic's buffered message, as the `MSG` frame that delivered it (topic and sequence are inside).
    case retained(frame: ByteBuffer)
    /// A topic's sequence number has reached at most this value (a ceiling written ahead for messages that are
    /// not retained, or the exact value on a clean shutdown).
    case sequence(topic: String, UInt64)
    /// A topic's buffered message was cleared.
    case cleared(topic: String)

    static let marker: UInt8 = 0xA5
    static let headerSize = 10

    var kind: UInt8 {
        switch self {
        case .retained: return 1
        case .sequence: return 2
        case .cleared: return 3
        }
    }

    /// Appends the record's bytes to `buffer`.
    func write(to buffer: inout ByteBuffer) {
        let start = buffer.writerIndex
        buffer.writeInteger(StateRecord.marker)
        buffer.writeInteger(kind)
        buffer.writeInteger(UInt32(0), endianness: .little)  // length, patched below
        buffer.writeInteger(UInt32(0), endianness: .little)  // checksum, patched below
        let bodyStart = buffer.writerIndex
        switch self {
        case .retained(let frame):
            buffer.writeImmutableBuffer(frame)
        case .sequence(let topic, let sequence):
            buffer.writeInteger(sequence, endianness: .little)
            buffer.writeString(topic)
        case .cleared(let topic):
            buffer.writeString(topic)
        }
        let length = buffer.writerIndex - bodyStart
        let checksum = buffer.withUnsafeReadableBytes { bytes in
            // The kind byte and the body, relative to the buffer's reader index.
            let base = start - buffer.readerIndex
            let kindAndBody = CRC32.checksum(UnsafeRawBufferPointer(rebasing: bytes[(base + 1)..<(base + 2)]))
            return CRC32.checksum(UnsafeRawBufferPointer(rebasing: bytes[(base + StateRecord.headerSize)...]), continuing: kindAndBody)
        }
        buffer.setInteger(UInt32(length), at: start + 2, endianness: .little)
        buffer.setInteger(checksum, at: start + 6, endianness: .little)
    }

    /// What reading the bytes at an offset found.
    enum Read {
        /// A whole, intact record, `size` bytes long.
        case record(StateRecord, size: Int)
        /// The bytes end inside a record: a write that was cut short.
        case truncated
        /// These bytes are not an intact record.
        case damaged(String)
    }

    /// Reads the record that starts at `offset` in `bytes`.
    static func read(_ bytes: ByteBuffer, at offset: Int, maxBodySize: Int) -> Read {
        let available = bytes.writerIndex - offset
        guard available >= headerSize else { return .truncated }
        guard bytes.getInteger(at: offset, as: UInt8.self) == marker else { return .damaged("no record marker") }
        let kind = bytes.getInteger(at: offset + 1, as: UInt8.self)!
        let length = Int(bytes.getInteger(at: offset + 2, endianness: .little, as: UInt32.self)!)
        let expected = bytes.getInteger(at: offset + 6, endianness: .little, as: UInt32.self)!
        guard (1...3).contains(kind) else { return .damaged("unknown record kind \(kind)") }
        guard length <= maxBodySize else { return .damaged("a record claims \(length) bytes") }
        guard available >= headerSize + length else { return .truncated }
        let body = bytes.getSlice(at: offset + headerSize, length: length)!
        let checksum = body.withUnsafeReadableBytes { body in
            withUnsafeBytes(of: kind) { CRC32.checksum(body, continuing: CRC32.checksum($0)) }
        }
        guard checksum == expected else { return .damaged("checksum mismatch") }
        let size = headerSize + length
        switch kind {
        case 1:
            return .record(.retained(frame: body), size: size)
        case 2:
            guard length > 8, let sequence = body.getInteger(at: body.readerIndex, endianness: .little, as: UInt64.self),
                let topic = body.getString(at: body.readerIndex + 8, length: length - 8)
            else { return .damaged("a short sequence record") }
            return .record(.sequence(topic: topic, sequence), size: size)
        default:
            guard length > 0, let topic = body.getString(at: body.readerIndex, length: length) else {
                return .damaged("an empty cleared record")
            }
            return .record(.cleared(topic: topic), size: size)
        }
    }
}
