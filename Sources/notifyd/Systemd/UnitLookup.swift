import CSystemd

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The systemd unit a process runs in (`sd_pid_get_unit`): who published, as the kernel's cgroups say.
enum UnitLookup {
    /// The unit of `pid`, or nil when it runs in none (a login session, a container) or is already gone.
    static func unit(of pid: Int32) -> String? {
        var unit: UnsafeMutablePointer<CChar>?
        guard sd_pid_get_unit(pid, &unit) >= 0, let unit else { return nil }
        defer { free(unit) }
        return String(cString: unit)
    }
}
