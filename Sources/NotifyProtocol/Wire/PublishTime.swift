#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// When the daemon accepted a publish: microseconds since 1970-01-01 00:00:00 UTC.
public struct PublishTime: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Microseconds since the Unix epoch, UTC.
    public var microsecondsSinceEpoch: UInt64

    /// Creates a time from microseconds since the Unix epoch.
    public init(microsecondsSinceEpoch: UInt64) {
        self.microsecondsSinceEpoch = microsecondsSinceEpoch
    }

    /// Later than any time a message gets.
    public static let distantFuture = PublishTime(microsecondsSinceEpoch: .max)

    /// The current wall-clock time.
    public static func now() -> PublishTime {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return PublishTime(microsecondsSinceEpoch: UInt64(max(0, spec.tv_sec)) * 1_000_000 + UInt64(spec.tv_nsec / 1_000))
    }

    public static func < (lhs: PublishTime, rhs: PublishTime) -> Bool {
        lhs.microsecondsSinceEpoch < rhs.microsecondsSinceEpoch
    }

    /// The time in RFC 3339 form, UTC, with microseconds: `2026-11-22T09:30:00.123456Z`.
    ///
    /// Written by hand so that printing a delivery does not load Foundation's calendar machinery.
    public var rfc3339: String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(27)
        appendRFC3339(to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends ``rfc3339`` to `out` as UTF-8, making no string: for output that renders many deliveries at once.
    package func appendRFC3339(to out: inout [UInt8]) {
        let micros = Int64(microsecondsSinceEpoch % 1_000_000)
        let seconds = Int64(microsecondsSinceEpoch / 1_000_000)
        let secondOfDay = seconds % 86_400
        let (year, month, day) = PublishTime.civilDate(daysSinceEpoch: seconds / 86_400)
        if year <= 9999 {
            // The 27 bytes written in place and appended at once: a delivery rendered as JSON has one.
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 27) { bytes in
                func put(_ value: Int64, at start: Int, width: Int) {
                    var rest = value
                    for index in stride(from: start + width - 1, through: start, by: -1) {
                        bytes[index] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: rest % 10)
                        rest /= 10
                    }
                }
                put(year, at: 0, width: 4)
                bytes[4] = UInt8(ascii: "-")
                put(month, at: 5, width: 2)
                bytes[7] = UInt8(ascii: "-")
                put(day, at: 8, width: 2)
                bytes[10] = UInt8(ascii: "T")
                put(secondOfDay / 3600, at: 11, width: 2)
                bytes[13] = UInt8(ascii: ":")
                put(secondOfDay / 60 % 60, at: 14, width: 2)
                bytes[16] = UInt8(ascii: ":")
                put(secondOfDay % 60, at: 17, width: 2)
                bytes[19] = UInt8(ascii: ".")
                put(micros, at: 20, width: 6)
                bytes[26] = UInt8(ascii: "Z")
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[0..<27]))
            }
            return
        }
        // A year past 9999 keeps all its digits, as the string form did.
        func digits(_ value: Int64, _ width: Int) { out.appendDecimal(UInt64(value), minimumDigits: width) }
        digits(year, 4)
        out.append(UInt8(ascii: "-"))
        digits(month, 2)
        out.append(UInt8(ascii: "-"))
        digits(day, 2)
        out.append(UInt8(ascii: "T"))
        digits(secondOfDay / 3600, 2)
        out.append(UInt8(ascii: ":"))
        digits(secondOfDay / 60 % 60, 2)
        out.append(UInt8(ascii: ":"))
        digits(secondOfDay % 60, 2)
        out.append(UInt8(ascii: "."))
        digits(micros, 6)
        out.append(UInt8(ascii: "Z"))
    }

    public var description: String { rfc3339 }

    /// Reads a time in RFC 3339 form: `2026-11-22T09:30:00Z`, with fractional seconds if wanted (microseconds are
    /// kept, finer digits dropped) and `Z` or an offset (`+01:00`); `t`, `z` and a space for `T` are accepted too.
    /// Nil for anything else, a time before 1970 included.
    public init?(rfc3339 text: String) {
        let bytes = Array(text.utf8)
        var index = 0
        func number(_ digits: Int) -> Int64? {
            guard index + digits <= bytes.count else { return nil }
            var value: Int64 = 0
            for byte in bytes[index..<index + digits] {
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int64(byte - UInt8(ascii: "0"))
            }
            index += digits
            return value
        }
        func expect(_ allowed: String) -> Bool {
            guard index < bytes.count, allowed.utf8.contains(bytes[index]) else { return false }
            index += 1
            return true
        }
        guard let year = number(4), expect("-"), let month = number(2), expect("-"), let day = number(2),
            expect("Tt "), let hour = number(2), expect(":"), let minute = number(2), expect(":"), let second = number(2),
            (1...12).contains(month), (1...PublishTime.daysIn(month: month, year: year)).contains(day),
            hour < 24, minute < 60, second < 61
        else { return nil }
        var micros: Int64 = 0
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            var digits = 0
            while index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") {
                if digits < 6 { micros = micros * 10 + Int64(bytes[index] - UInt8(ascii: "0")) }
                digits += 1
                index += 1
            }
            guard digits > 0 else { return nil }
            if digits < 6 { for _ in digits..<6 { micros *= 10 } }
        }
        var offset: Int64 = 0
        if expect("Zz") {
        } else if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
            let sign: Int64 = bytes[index] == UInt8(ascii: "-") ? -1 : 1
            index += 1
            guard let hours = number(2), expect(":"), let minutes = number(2), hours < 24, minutes < 60 else { return nil }
            offset = sign * (hours * 3600 + minutes * 60)
        } else {
            return nil
        }
        guard index == bytes.count else { return nil }
        let days = PublishTime.daysSinceEpoch(year: year, month: month, day: day)
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + min(second, 59) - offset
        guard seconds >= 0 else { return nil }
        self.init(microsecondsSinceEpoch: UInt64(seconds) * 1_000_000 + UInt64(micros))
    }

    /// Howard Hinnant's days-from-civil algorithm, the inverse of ``civilDate(daysSinceEpoch:)``.
    private static func daysSinceEpoch(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    private static func daysIn(month: Int64, year: Int64) -> Int64 {
        switch month {
        case 2: return year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Howard Hinnant's days-to-civil algorithm (proleptic Gregorian calendar).
    private static func civilDate(daysSinceEpoch: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = daysSinceEpoch + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}

