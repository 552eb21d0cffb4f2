#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The process's limit on open files, which caps how many connections the daemon can hold.
///
/// The soft limit is usually 1024, set for `select(2)`, which SwiftNIO does not use; the hard limit (524288 under
/// systemd) is what a server may take. Raising the soft limit to the hard one is what systemd's own documentation
/// recommends for such daemons (systemd.exec(5), `LimitNOFILE=`).
enum FileDescriptorLimit {
    /// Raises the soft limit to the hard limit; returns the limit now in force.
    static func raiseToMaximum() -> UInt64 {
        var limit = rlimit()
        guard getrlimit(RLIMIT_NOFILE_VALUE, &limit) == 0 else { return 1024 }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(RLIMIT_NOFILE_VALUE, &raised) == 0 { return UInt64(raised.rlim_cur) }
        }
        return UInt64(limit.rlim_cur)
    }

    #if canImport(Glibc)
    private static let RLIMIT_NOFILE_VALUE = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
    #else
    private static let RLIMIT_NOFILE_VALUE = RLIMIT_NOFILE
    #endif
}
