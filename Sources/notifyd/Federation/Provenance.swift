import NATSClient
import NIOCore
import NotifyBus

#if canImport(Glibc)
import Glibc
#endif

/// Where a message crossing NATS comes from: its host, its publisher there, its number and time, and whether it is
/// retained, carried in NATS headers (`Notifyd-Host`, `Notifyd-Uid`, `Notifyd-Pid`, `Notifyd-Unit`, `Notifyd-Seq`,
/// `Notifyd-Time`, `Notifyd-Retain`), one per field so that any NATS tool shows them.
struct Provenance: Equatable {
    var host: String?
    var uid: UInt32 = 0
    var pid: Int32 = 0
    var unit: String?
    var sequence: UInt64 = 0
    var time: UInt64 = 0
    /// True unless `Notifyd-Retain: 0`: a message some other NATS client published is kept as the topic's latest, as
    /// `notify send` keeps it.
    var retain = true

    /// The origin of a message some other NATS client published, without our headers.
    static let unknownHost = "nats"

    /// Reads the provenance from `headers` without a `String` per field: the host and the unit are made only when
    /// they differ from `known`'s (the last message's, usually the same).
    init(headers: NATSHeaders?, reusing known: Provenance? = nil) {
        guard let headers else { return }
        headers.forEachField { name, value in
            // "Notifyd-" then one of Host, Uid, Pid, Unit, Seq, Time, Retain: told apart by length and first letter.
            guard name.count >= 11, Self.hasPrefix(name) else { return }
            let first = name[8] | 0x20
            switch (name.count - 8, first) {
            case (4, UInt8(ascii: "h")):
                // Past a host name's length it is refused as not one (the bridge checks): no long string made.
                host = value.count <= Self.longestHostName ? Self.text(value, reusing: known?.host) : ""
            case (3, UInt8(ascii: "u")):
                uid = Self.number(value).flatMap { UInt32(exactly: $0) } ?? 0
            case (3, UInt8(ascii: "p")):
                pid = Self.number(value).flatMap { Int32(exactly: $0) } ?? 0
            case (4, UInt8(ascii: "u")):
                // Bounded where it enters: anything but a unit name is no unit (see ImportedMessage.isValidUnitName).
                unit = value.count <= Self.longestUnitName ? Self.text(value, reusing: known?.unit) : nil
                if let claimed = unit, !ImportedMessage.isValidUnitName(claimed) { unit = nil }
            case (3, UInt8(ascii: "s")):
                sequence = Self.number(value) ?? 0
            case (4, UInt8(ascii: "t")):
                time = Self.number(value) ?? 0
            case (6, UInt8(ascii: "r")):
                retain = !(value.count == 1 && value[0] == UInt8(ascii: "0"))
            default:
                return
            }
        }
    }

    private static let prefix = Array("notifyd-".utf8)
    private static let longestHostName = 64
    private static let longestUnitName = 255

    private static func hasPrefix(_ name: UnsafeRawBufferPointer) -> Bool {
        for index in 0..<prefix.count where name[index] | 0x20 != prefix[index] {
            return false
        }
        return true
    }

    /// `bytes` as text: `known` itself when it is the same text.
    private static func text(_ bytes: UnsafeRawBufferPointer, reusing known: String?) -> String {
        if var known, known.withUTF8({ $0.count == bytes.count && memcmp($0.baseAddress!, bytes.baseAddress!, bytes.count) == 0 }) {
            return known
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    init() {}

    private static func number(_ bytes: UnsafeRawBufferPointer) -> UInt64? {
        guard !bytes.isEmpty, bytes.count <= 19 else { return nil }
        var value: UInt64 = 0
        for byte in bytes {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
            value = value * 10 + UInt64(byte - UInt8(ascii: "0"))
        }
        return value
    }
}

/// Writes a local publish as the NATS operations that export it: `HPUB <prefix>.<topic>` with the provenance
/// headers, and for a retained one the same to `<prefix>-latest.<topic>` (the stream of latest messages). Straight
/// into the outbox's buffer: no `String`, no headers value, no buffer of its own per message.
struct ExportEncoder {
    private let livePrefix: [UInt8]
    private let latestPrefix: [UInt8]
    /// `NATS/1.0` and the host's line, the same for every message.
    private let headerStart: [UInt8]
    /// The header block of the message being written, reused.
    private var headers = ByteBuffer()

    init(prefix: String, hostName: String) {
        livePrefix = Array("HPUB \(prefix).".utf8)
        latestPrefix = Array("HPUB \(prefix)-latest.".utf8)
        headerStart = Array("NATS/1.0\r\nNotifyd-Host: \(hostName)\r\n".utf8)
    }

    /// Writes `message`'s operations: ``prepare(_:)`` then ``writePrepared(_:into:)``.
    mutating func write(_ message: ExportedMessage, into buffer: inout ByteBuffer) {
        _ = prepare(message)
        writePrepared(message, into: &buffer)
    }

    /// Builds `message`'s headers and returns the size NATS counts against its `max_payload`: headers and payload.
    mutating func prepare(_ message: ExportedMessage) -> Int {
        headers.clear()
        headers.writeBytes(headerStart)
        headers.writeStaticString("Notifyd-Uid: ")
        headers.writeDecimal(UInt64(message.publisher.uid))
        headers.writeStaticString("\r\nNotifyd-Pid: ")
        headers.writeDecimal(Int64(message.publisher.pid))
        if let unit = message.publisher.unit {
            headers.writeStaticString("\r\nNotifyd-Unit: ")
            headers.writeString(unit)
        }
        headers.writeStaticString("\r\nNotifyd-Seq: ")
        headers.writeDecimal(message.sequence)
        headers.writeStaticString("\r\nNotifyd-Time: ")
        headers.writeDecimal(message.time.microsecondsSinceEpoch)
        headers.writeStaticString(message.retain ? "\r\nNotifyd-Retain: 1\r\n\r\n" : "\r\nNotifyd-Retain: 0\r\n\r\n")
        return headers.readableBytes + message.payload.readableBytes
    }

    /// Writes the operations of the message last given to ``prepare(_:)``.
    func writePrepared(_ message: ExportedMessage, into buffer: inout ByteBuffer) {
        writeOperation(livePrefix, message, into: &buffer)
        if message.retain { writeOperation(latestPrefix, message, into: &buffer) }
    }

    private func writeOperation(_ prefix: [UInt8], _ message: ExportedMessage, into buffer: inout ByteBuffer) {
        let headerSize = headers.readableBytes
        buffer.writeBytes(prefix)
        buffer.writeString(message.topic.name)
        buffer.writeStaticString(" ")
        buffer.writeDecimal(UInt64(headerSize))
        buffer.writeStaticString(" ")
        buffer.writeDecimal(UInt64(headerSize + message.payload.readableBytes))
        buffer.writeStaticString("\r\n")
        buffer.writeImmutableBuffer(headers)
        buffer.writeImmutableBuffer(message.payload)
        buffer.writeStaticString("\r\n")
    }
}
