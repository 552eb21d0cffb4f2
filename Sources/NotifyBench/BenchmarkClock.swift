#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import NotifyBus

/// The clocks a benchmark reads: the monotonic clock its timestamps are taken on, and its own CPU time.
enum BenchmarkClock {
    /// Nanoseconds on the monotonic clock (`CLOCK_MONOTONIC`), the same in every thread of the process.
    @inline(__always)
    static func now() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return UInt64(spec.tv_sec) &* 1_000_000_000 &+ UInt64(spec.tv_nsec)
    }

    /// The CPU time this process has used so far, user and system, all threads, in seconds.
    static func ownCPUSeconds() -> Double {
        var usage = rusage()
        #if canImport(Glibc)
        getrusage(RUSAGE_SELF.rawValue, &usage)  // glibc's header makes `who` an enum for C, an int here
        #else
        getrusage(RUSAGE_SELF, &usage)
        #endif
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }

    /// Seconds from nanoseconds.
    static func seconds(nanoseconds: UInt64) -> Double { Double(nanoseconds) / 1e9 }

    /// Nanoseconds in `duration`, or UInt64.max for a duration longer than about 584 years.
    static func nanoseconds(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        guard seconds >= 0 else { return 0 }
        let (whole, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1_000_000_000)
        return overflow ? .max : whole &+ UInt64(attoseconds / 1_000_000_000)
    }

    private static func seconds(_ value: timeval) -> Double {
        Double(value.tv_sec) + Double(value.tv_usec) / 1e6
    }
}
