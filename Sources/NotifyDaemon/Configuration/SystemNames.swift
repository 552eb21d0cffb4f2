import NotifyProtocol
import NotifyBroker

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension AccessRule.NameResolver {
    /// Names as this system knows them (`/etc/passwd`, `/etc/group`, or whatever NSS is set up to ask).
    static let system = AccessRule.NameResolver(
        uid: { name in
            var entry = passwd()
            var result: UnsafeMutablePointer<passwd>?
            var buffer = [CChar](repeating: 0, count: 16 << 10)
            guard getpwnam_r(name, &entry, &buffer, buffer.count, &result) == 0, result != nil else { return nil }
            return entry.pw_uid
        },
        gid: { name in
            var entry = group()
            var result: UnsafeMutablePointer<group>?
            var buffer = [CChar](repeating: 0, count: 16 << 10)
            guard getgrnam_r(name, &entry, &buffer, buffer.count, &result) == 0, result != nil else { return nil }
            return entry.gr_gid
        }
    )
}

/// A user's primary group and every group it is a member of, as the system knows them; nil for an unknown uid.
func systemGroups(ofUser uid: UInt32) -> (gid: UInt32, groups: [UInt32])? {
    var entry = passwd()
    var result: UnsafeMutablePointer<passwd>?
    var buffer = [CChar](repeating: 0, count: 16 << 10)
    guard getpwuid_r(uid, &entry, &buffer, buffer.count, &result) == 0, result != nil, let name = entry.pw_name else { return nil }
    var count: Int32 = 64
    var groups = [gid_t](repeating: 0, count: Int(count))
    if getgrouplist(name, entry.pw_gid, &groups, &count) < 0 {
        groups = [gid_t](repeating: 0, count: Int(count))
        guard getgrouplist(name, entry.pw_gid, &groups, &count) >= 0 else { return (entry.pw_gid, []) }
    }
    return (entry.pw_gid, Array(groups.prefix(Int(count))))
}
