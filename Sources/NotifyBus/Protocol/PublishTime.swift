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

    /// The current wall-clock time.
    public static func now() -> PublishTime {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return PublishTime(microsecondsSinceEpoch: UInt64(spec.tv_sec) * 1_000_000 + UInt64(spec.tv_nsec / 1_000))
    }

    public static func < (lhs: PublishTime, rhs: PublishTime) -> Bool {
        lhs.microsecondsSinceEpoch < rhs.microsecondsSinceEpoch
    }

    /// The time in RFC 3339 form, UTC, with microseconds: `2026-11-22T09:30:00.123456Z`.
    ///
    /// Written by hand so that printing a delivery does not load Foundation's calendar machinery.
    public var rfc3339: String {
        let micros = microsecondsSinceEpoch % 1_000_000
        let seconds = Int64(microsecondsSinceEpoch / 1_000_000)
        let days = seconds / 86_400
        let secondOfDay = seconds % 86_400
        let (year, month, day) = PublishTime.civilDate(daysSinceEpoch: days)
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(secondOfDay / 3600, 2)):"
            + "\(pad(secondOfDay / 60 % 60, 2)):\(pad(secondOfDay % 60, 2)).\(pad(Int64(micros), 6))Z"
    }

    public var description: String { rfc3339 }

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

private func pad(_ value: Int64, _ width: Int) -> String {
    let digits = String(value)
    return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
}
