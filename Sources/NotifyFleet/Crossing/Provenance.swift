package import NATSClient
import NotifyProtocol

#if canImport(Glibc)
import Glibc
#endif

/// Where a message crossing NATS comes from: its host, its publisher there, its number and time, whether it is
/// retained or a clear, and, on the live subjects, where it stands in its origin's exports (``ExportStamp``), carried
/// in one NATS header, its fields separated by one space:
///
///     Notifyd: 1 <host> <uid> <pid> <seq> <time> <kind> <export> <log> <unit>
///
/// `1` is the header's version; `<kind>` is `m` (a message), `r` (retained) or `c` (a clear); `<export>` is
/// `<epoch>-<number>` and `<log>` the origin's last acknowledged log record, or `-` each on a copy for the stream of
/// latest messages; `<unit>` is `-` when there is none. A version other than 1 is not read. The header of one field
/// per value that earlier versions wrote (`Notifyd-Host`, `Notifyd-Uid`, `Notifyd-Pid`, `Notifyd-Unit`,
/// `Notifyd-Seq`, `Notifyd-Time`, `Notifyd-Retain`, `Notifyd-Clear`, `Notifyd-Export`, `Notifyd-Log`) is read too:
/// the stream of latest messages holds them, and another NATS client may write them.
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
    /// `Notifyd-Clear: 1`: the origin cleared the topic's buffered message (an `EXP` of kind clear).
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
            if name.count == 7, Self.hasPrefix(name, count: 7) {
                readFields(value, reusing: known)
                return
            }
            // "Notifyd-" then one of Host, Uid, Pid, Unit, Seq, Time, Retain, Clear: told apart by length and first
            // letter.
            guard name.count >= 11, Self.hasPrefix(name, count: 8) else { return }
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

    /// Whether `name` starts with the first `count` bytes of `notifyd-`, in any case.
    private static func hasPrefix(_ name: UnsafeRawBufferPointer, count: Int) -> Bool {
        for index in 0..<count where name[index] | 0x20 != prefix[index] {
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

    /// Reads the one header's fields (see the type's description): each as its field of one per value would be,
    /// with the same bounds; a header of another version, or of fewer fields, is not read at all.
    private mutating func readFields(_ value: UnsafeRawBufferPointer, reusing known: Provenance?) {
        // Field by field, without an array of them: this runs for every message another host sends.
        var read = Provenance()
        var field = 0
        var start = 0
        while field < Self.fieldCount, start <= value.count {
            var end = start
            while end < value.count, value[end] != UInt8(ascii: " ") { end += 1 }
            let token = UnsafeRawBufferPointer(rebasing: value[start..<end])
            switch field {
            case 0:
                guard token.count == 1, token[0] == UInt8(ascii: "1") else { return }
            case 1:
                // Past a host name's length it is refused as not one (the broker checks): no long string made.
                read.host = token.count <= Self.longestHostName ? Self.text(token, reusing: known?.host) : ""
            case 2: read.uid = Self.number(token).flatMap { UInt32(exactly: $0) } ?? 0
            case 3: read.pid = Self.number(token).flatMap { Int32(exactly: $0) } ?? 0
            case 4: read.sequence = Self.number(token) ?? 0
            case 5: read.time = Self.number(token) ?? 0
            case 6:
                let kind = token.count == 1 ? token[0] : 0
                read.retain = kind != UInt8(ascii: "m")
                read.isClear = kind == UInt8(ascii: "c")
            case 7: read.export = ExportStamp(parsing: token)
            case 8: read.logSequence = Self.number(token) ?? 0
            default:
                guard token.count != 1 || token[0] != UInt8(ascii: "-"), token.count <= Self.longestUnitName else { break }
                // Bounded where it enters: anything but a unit name is no unit (see FleetImport.isValidUnitName).
                let claimed = Self.text(token, reusing: known?.unit)
                if FleetImport.isValidUnitName(claimed) { read.unit = claimed }
            }
            field += 1
            start = end + 1
        }
        if field == Self.fieldCount { self = read }
    }

    /// The one header's fields, its version first.
    private static let fieldCount = 10

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
