import NIOCore
import NotifyProtocol

/// One record of the state log, and its bytes on disk (format 2):
///
/// ```
/// offset 0  u8     0xA5, the record marker (lets a reader find the next record after damage)
///        1  u8     kind: 1 retained message, 2 sequence, 3 cleared, 4 history message, 5 forgotten topic,
///                  6 retained history message
///        2  u32 LE length of the body
///        6  u32 LE header seal: SipHash of bytes 0..<6 (domain 1), low 32 bits
///       10  u64 LE record seal: SipHash of bytes 0..<6 (domain 2) and the body
///       18  body   retained: the MSG frame as delivered
///                  sequence: u64 LE sequence number, then the topic
///                  cleared:  the topic
///                  history:  the MSG frame as delivered
///                  forgotten: u64 LE sequence number, u64 LE time of its last message (µs), then the topic
///                  retained history: u64 LE sequence number, then the topic
/// ```
///
/// A log with kind 5 (notifyd after issue 34) or kind 6 (after issue 38) reads as damaged to an older notifyd, which
/// keeps it aside, reads on past such a record and goes on without it: downgraded, a topic whose buffered message was
/// a mark on its history (kind 6) has none, until it is published again.
///
/// Both seals are keyed with the log's secret ``RecordKey``, so only the daemon can write a record that reads as
/// intact; the header seal lets a reader searching past damage reject a candidate without hashing its body.
///
/// Format 1 (notifyd before 0.2) had a 10-byte header: marker, kind, length, then a CRC-32 of the kind byte and
/// the body. It is still read, to upgrade an old log, but never written.
enum StateRecord: Equatable {
    /// A topic's buffered message, as the `MSG` frame that delivered it (topic and sequence are inside).
    case retained(frame: ByteBuffer)
    /// A topic's sequence number has reached at most this value (a ceiling written ahead for messages that are
    /// not retained, or the exact value on a clean shutdown).
    case sequence(topic: String, UInt64)
    /// A topic's buffered message was cleared.
    case cleared(topic: String)
    /// A message its topic's history keeps, as the `MSG` frame that delivered it; a topic's history records come in
    /// the order published.
    case history(frame: ByteBuffer)
    /// A topic's buffered message is the message numbered `sequence` of its history, whose record comes before: the
    /// message is written once, in the history record, and marked retained by this one.
    case retainedInHistory(topic: String, sequence: UInt64)
    /// A topic the broker forgot to make room (``ForgottenTopics``): its last sequence number and the time of its
    /// last message (µs); the topic ``ForgottenTopics/unrememberedName`` carries the count of messages of topics no
    /// longer remembered and the newest time among them.
    case forgotten(topic: String, sequence: UInt64, time: UInt64)

    static let marker: UInt8 = 0xA5

    /// How records are checked: the two formats a log file may have.
    enum Format {
        /// Format 1: a CRC-32, which anyone can compute. Read only.
        case checksummed
        /// Format 2: seals keyed with the log's secret.
        case sealed(RecordKey)

        var headerSize: Int {
            switch self {
            case .checksummed: 10
            case .sealed: 18
            }
        }
    }

    var kind: UInt8 {
        switch self {
        case .retained: return StateRecord.retainedKind
        case .sequence: return 2
        case .cleared: return 3
        case .history: return StateRecord.historyKind
        case .forgotten: return 5
        case .retainedInHistory: return 6
        }
    }

    /// The kinds of a retained message's and a history message's records, for writing one from bytes that are not
    /// a buffer.
    static let retainedKind: UInt8 = 1
    static let historyKind: UInt8 = 4

    /// Appends the record's bytes, sealed with `key`, to `buffer`.
    func write(to buffer: inout ByteBuffer, sealedWith key: RecordKey) {
        StateRecord.write(kind: kind, to: &buffer, sealedWith: key) { buffer in
            switch self {
            case .retained(let frame), .history(let frame):
                buffer.writeImmutableBuffer(frame)
            case .sequence(let topic, let sequence), .retainedInHistory(let topic, let sequence):
                buffer.writeInteger(sequence, endianness: .little)
                buffer.writeString(topic)
            case .cleared(let topic):
                buffer.writeString(topic)
            case .forgotten(let topic, let sequence, let time):
                buffer.writeInteger(sequence, endianness: .little)
                buffer.writeInteger(time, endianness: .little)
                buffer.writeString(topic)
            }
        }
    }

    /// Appends a record of `kind` whose body `writeBody` writes, sealed with `key`, to `buffer`: for a body that is
    /// not a buffer already (a history frame still in the broker's batch).
    static func write(kind: UInt8, to buffer: inout ByteBuffer, sealedWith key: RecordKey, _ writeBody: (inout ByteBuffer) -> Void) {
        let start = buffer.writerIndex
        buffer.writeRepeatingByte(0, count: Format.sealed(key).headerSize)  // patched below, once the length is known
        writeBody(&buffer)
        let length = buffer.writerIndex - start - Format.sealed(key).headerSize
        let word = StateRecord.headerWord(kind: kind, length: length)
        let seal = buffer.withUnsafeReadableBytes { bytes in
            key.hash.hash(word: word | StateRecord.bodyDomain, UnsafeRawBufferPointer(rebasing: bytes[(start - buffer.readerIndex + 18)...]))
        }
        buffer.setInteger(StateRecord.marker, at: start)
        buffer.setInteger(kind, at: start + 1)
        buffer.setInteger(UInt32(length), at: start + 2, endianness: .little)
        buffer.setInteger(key.headerSeal(word), at: start + 6, endianness: .little)
        buffer.setInteger(seal, at: start + 10, endianness: .little)
    }

    /// Appends a record of `kind` whose body is `body`, sealed with `key`, to `buffer`: the seal is taken from the
    /// body where it is, and the record goes in with two writes (the hot path: a history message per batch).
    static func write(kind: UInt8, body: UnsafeRawBufferPointer, to buffer: inout ByteBuffer, sealedWith key: RecordKey) {
        let word = StateRecord.headerWord(kind: kind, length: body.count)
        let hash = key.hash
        let seal = hash.hash(word: word | StateRecord.bodyDomain, body)
        let headerSeal = UInt32(truncatingIfNeeded: hash.hash(word: word | StateRecord.headerDomain))
        // marker, kind, length (u32 LE), header seal (u32 LE), record seal (u64 LE): 18 bytes.
        var header: (UInt64, UInt64, UInt16) = (0, 0, 0)
        withUnsafeMutableBytes(of: &header) { bytes in
            bytes.storeBytes(of: (word & 0xFFFF_FFFF_FFFF).littleEndian, toByteOffset: 0, as: UInt64.self)
            bytes.storeBytes(of: headerSeal.littleEndian, toByteOffset: 6, as: UInt32.self)
            bytes.storeBytes(of: seal.littleEndian, toByteOffset: 10, as: UInt64.self)
        }
        buffer.reserveCapacity(minimumWritableBytes: 18 + body.count)
        withUnsafeBytes(of: &header) { _ = buffer.writeBytes(UnsafeRawBufferPointer(rebasing: $0[0..<18])) }
        buffer.writeBytes(body)
    }

    /// Bytes 0..<6 of a record's header as a little-endian word; bits 48... carry the seal's domain.
    static func headerWord(kind: UInt8, length: Int) -> UInt64 {
        UInt64(marker) | UInt64(kind) << 8 | UInt64(truncatingIfNeeded: UInt32(truncatingIfNeeded: length)) << 16
    }

    static let headerDomain: UInt64 = 1 << 48
    static let bodyDomain: UInt64 = 2 << 48

    /// What reading the bytes at an offset found.
    enum Read {
        /// A whole, intact record, `size` bytes long.
        case record(StateRecord, size: Int)
        /// The bytes end inside a record: a write that was cut short.
        case truncated
        /// These bytes are not an intact record. `extent` is the record's size when its header is intact (sealed
        /// format only): the damage is in its body, and the next record starts after it.
        case damaged(String, extent: Int?)
    }

    /// Reads the record that starts at `offset` in `bytes`.
    static func read(_ bytes: ByteBuffer, at offset: Int, maxBodySize: Int, format: Format) -> Read {
        let headerSize = format.headerSize
        let available = bytes.writerIndex - offset
        guard available >= headerSize else { return .truncated }
        guard bytes.getInteger(at: offset, as: UInt8.self) == marker else { return .damaged("no record marker", extent: nil) }
        let kind = bytes.getInteger(at: offset + 1, as: UInt8.self)!
        let length = Int(bytes.getInteger(at: offset + 2, endianness: .little, as: UInt32.self)!)
        let word = headerWord(kind: kind, length: length)
        if case .sealed(let key) = format,
            bytes.getInteger(at: offset + 6, endianness: .little, as: UInt32.self)! != key.headerSeal(word)
        {
            return .damaged("a record header that does not match its seal", extent: nil)
        }
        guard (1...6).contains(kind) else { return .damaged("unknown record kind \(kind)", extent: nil) }
        guard length <= maxBodySize else { return .damaged("a record claims \(length) bytes", extent: nil) }
        guard available >= headerSize + length else { return .truncated }
        let size = headerSize + length
        let body = bytes.getSlice(at: offset + headerSize, length: length)!
        switch format {
        case .checksummed:
            let expected = bytes.getInteger(at: offset + 6, endianness: .little, as: UInt32.self)!
            let checksum = body.withUnsafeReadableBytes { body in
                withUnsafeBytes(of: kind) { CRC32.checksum(body, continuing: CRC32.checksum($0)) }
            }
            guard checksum == expected else { return .damaged("checksum mismatch", extent: nil) }
        case .sealed(let key):
            let expected = bytes.getInteger(at: offset + 10, endianness: .little, as: UInt64.self)!
            let seal = body.withUnsafeReadableBytes { key.hash.hash(word: word | bodyDomain, $0) }
            guard seal == expected else { return .damaged("a record that does not match its seal", extent: size) }
        }
        switch kind {
        case 1:
            return .record(.retained(frame: body), size: size)
        case 4:
            return .record(.history(frame: body), size: size)
        case 2, 6:
            guard length > 8, let sequence = body.getInteger(at: body.readerIndex, endianness: .little, as: UInt64.self),
                let topic = body.getString(at: body.readerIndex + 8, length: length - 8)
            else { return .damaged(kind == 2 ? "a short sequence record" : "a short retained-history record", extent: size) }
            return .record(kind == 2 ? .sequence(topic: topic, sequence) : .retainedInHistory(topic: topic, sequence: sequence), size: size)
        case 5:
            guard length > 16, let sequence = body.getInteger(at: body.readerIndex, endianness: .little, as: UInt64.self),
                let time = body.getInteger(at: body.readerIndex + 8, endianness: .little, as: UInt64.self),
                let topic = body.getString(at: body.readerIndex + 16, length: length - 16)
            else { return .damaged("a short forgotten-topic record", extent: size) }
            return .record(.forgotten(topic: topic, sequence: sequence, time: time), size: size)
        default:
            guard length > 0, let topic = body.getString(at: body.readerIndex, length: length) else {
                return .damaged("an empty cleared record", extent: size)
            }
            return .record(.cleared(topic: topic), size: size)
        }
    }
}

/// The secret a state log seals its records with: 128 random bits, drawn when the log is created and kept in its
/// header. The state directory is readable by the daemon's user alone, so a client never learns it.
struct RecordKey: Equatable {
    let k0: UInt64
    let k1: UInt64

    static func random() -> RecordKey {
        var generator = SystemRandomNumberGenerator()
        return RecordKey(k0: generator.next(), k1: generator.next())
    }

    var hash: SipHash { SipHash(k0: k0, k1: k1) }

    func headerSeal(_ word: UInt64) -> UInt32 {
        UInt32(truncatingIfNeeded: hash.hash(word: word | StateRecord.headerDomain))
    }
}
