package import NATSClient
import NotifyProtocol

#if canImport(Glibc)
import Glibc
#endif

/// Where a message crossing NATS comes from: its host, its publisher there, its number and time, and whether it is
/// retained or a clear, carried in NATS headers (`Notifyd-Host`, `Notifyd-Uid`, `Notifyd-Pid`, `Notifyd-Unit`,
/// `Notifyd-Seq`, `Notifyd-Time`, `Notifyd-Retain`, `Notifyd-Clear`), one per field so that any NATS tool shows them;
/// and, on the live subjects, where it stands in its origin's exports (`Notifyd-Export: <epoch>-<number>`,
/// `Notifyd-Log: <log sequence>`, ``ExportStamp``).
package struct Provenance: Equatable {
    package var host: String?
    package var uid: UInt32 = 0
    package var pid: Int32 = 0
    package var unit: String?
    package var sequence: UInt64 = 0
    package var time: UInt64 = 0
    /// True unless `Notifyd-Retain: 0`: a message some other NATS client published is kept as the topic's latest, as
    /// `notify send` keeps it.
    package var retain = true
    /// `Notifyd-Clear: 1`: the origin cleared the topic's buffered message (``ExportedMessage/isClear``).
    package var isClear = false
    /// `Notifyd-Export`: the origin's export number, when it sent one.
    package var export: ExportStamp?
    /// `Notifyd-Log`: the origin's log had every record through this stream sequence before this message was
    /// exported, so the record that holds it comes after (0: not said).
    package var logSequence: UInt64 = 0

    /// The origin of a message some other NATS client published, without our headers.
    package static let unknownHost = "nats"

    /// Reads the provenance from `headers` without a `String` per field: the host and the unit are made only when
    /// they differ from `known`'s (the last message's, usually the same).
    package init(headers: NATSHeaders?, reusing known: Provenance? = nil) {
        guard let headers else { return }
        headers.forEachField { name, value in
            // "Notifyd-" then one of Host, Uid, Pid, Unit, Seq, Time, Retain, Clear: told apart by length and first
            // letter.
            guard name.count >= 11, Self.hasPrefix(name) else { return }
            let first = name[8] | 0x20
            switch (name.count - 8, first) {
            case (4, UInt8(ascii: "h")):
                // Past a host name's length it is refused as not one (the broker checks): no long string made.
                host = value.count <= Self.longestHostName ? Self.text(value, reusing: known?.host) : ""
            case (3, UInt8(ascii: "u")):
                uid = Self.number(value).flatMap { UInt32(exactly: $0) } ?? 0
            case (3, UInt8(ascii: "p")):
                pid = Self.number(value).flatMap { Int32(exactly: $0) } ?? 0
            case (4, UInt8(ascii: "u")):
                // Bounded where it enters: anything but a unit name is no unit (see FleetImport.isValidUnitName).
                unit = value.count <= Self.longestUnitName ? Self.text(value, reusing: known?.unit) : nil
                if let claimed = unit, !FleetImport.isValidUnitName(claimed) { unit = nil }
            case (3, UInt8(ascii: "s")):
                sequence = Self.number(value) ?? 0
            case (4, UInt8(ascii: "t")):
                time = Self.number(value) ?? 0
            case (6, UInt8(ascii: "r")):
                retain = !(value.count == 1 && value[0] == UInt8(ascii: "0"))
            case (5, UInt8(ascii: "c")):
                isClear = value.count == 1 && value[0] == UInt8(ascii: "1")
            case (6, UInt8(ascii: "e")):
                export = ExportStamp(parsing: value)
            case (3, UInt8(ascii: "l")):
                logSequence = Self.number(value) ?? 0
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

    package init() {}

    static func number(_ bytes: UnsafeRawBufferPointer) -> UInt64? {
        guard !bytes.isEmpty, bytes.count <= 19 else { return nil }
        var value: UInt64 = 0
        for byte in bytes {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
            value = value * 10 + UInt64(byte - UInt8(ascii: "0"))
        }
        return value
    }
}
