import NotifySystem

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The systemd unit a process runs in, read from its control group as `sd_pid_get_unit(3)` reads it, without
/// libsystemd: the path in `/proc/PID/cgroup` (the unified hierarchy's, or the legacy `name=systemd` one's), made
/// relative to the root systemd runs under (PID 1's group less `/init.scope`, for a manager in a container), then
/// the first component that is not a slice, if it is a valid unit name. `/system.slice/backup.service/worker` is
/// `backup.service`; a user's service is its manager's, `user@1000.service`, as with libsystemd; a login session is
/// its scope; a process in a slice alone, or in none, has no unit.
///
/// What a `unit:` access rule lets through rests on this: it is held to systemd's own test cases
/// ([CgroupUnitTests](../../../Tests/NotifydTests/CgroupUnitTests.swift)), and it never names a unit when in doubt.
enum CgroupUnit {
    /// The unit of `pid`, or nil when it runs in none, is gone, or its group cannot be read.
    static func unit(ofProcess pid: Int32) -> String? {
        guard pid > 0, let own = path(inCgroupFile: read("/proc/\(pid)/cgroup")) else { return nil }
        // PID 1's group says where systemd's tree starts; unreadable, the tree starts at the top, as on a host.
        let root = path(inCgroupFile: read("/proc/1/cgroup")).map(rootPath(ofInitPath:)) ?? "/"
        return unit(ofPath: shifted(own, below: root))
    }

    /// The path systemd's own hierarchy gives in the contents of a `/proc/PID/cgroup` file: the `name=systemd`
    /// line's where there is one (the legacy and hybrid layouts, where that is systemd's tree), else the unified
    /// hierarchy's (`0::`).
    static func path(inCgroupFile contents: String?) -> String? {
        guard let contents else { return nil }
        var unified: Substring?
        for line in contents.split(separator: "\n") {
            // hierarchy-ID:controller-list:path; the path may itself hold colons.
            let fields = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard fields.count == 3, fields[2].first == "/" else { continue }
            if fields[1] == "name=systemd" { return String(fields[2]) }
            if fields[0] == "0", fields[1].isEmpty { unified = fields[2] }
        }
        return unified.map(String.init)
    }

    /// Where systemd's tree starts, from PID 1's group: that group less its `/init.scope` (or, on older layouts,
    /// `/system.slice` or `/system`).
    static func rootPath(ofInitPath path: String) -> String {
        for suffix in ["/init.scope", "/system.slice", "/system"] where path.hasSuffix(suffix) {
            let root = String(path.dropLast(suffix.count))
            return root.isEmpty ? "/" : root
        }
        return path
    }

    /// `path` relative to `root`, when it lies below it (whole components); else `path`.
    static func shifted(_ path: String, below root: String) -> String {
        let trimmedRoot = root.hasSuffix("/") ? String(root.dropLast()) : root
        guard !trimmedRoot.isEmpty, path.hasPrefix(trimmedRoot) else { return path }
        let rest = path.dropFirst(trimmedRoot.count)
        guard rest.isEmpty || rest.first == "/" else { return path }
        return rest.isEmpty ? "/" : String(rest)
    }

    /// The unit a group's path names: its first component that is not a slice, as a unit name (a leading `_`,
    /// systemd's escape for names that would clash with the kernel's files, taken off); nil when that is no valid
    /// plain or instance unit name, or is a slice.
    static func unit(ofPath path: String) -> String? {
        var components = path.split(separator: "/")[...]
        while let first = components.first, isSliceName(first) { components.removeFirst() }
        guard let first = components.first else { return nil }
        let unit = unescaped(first)
        guard isValidUnitName(unit, allowInstance: true), !unit.hasSuffix(".slice") else { return nil }
        return String(unit)
    }

    private static func isSliceName(_ component: Substring) -> Bool {
        component.hasSuffix(".slice") && isValidUnitName(unescaped(component), allowInstance: false)
    }

    private static func unescaped(_ component: Substring) -> Substring {
        component.first == "_" ? component.dropFirst() : component
    }

    /// The unit types systemd knows, the part after a unit name's last dot.
    private static let unitTypes: Set<Substring> = [
        "service", "mount", "swap", "socket", "target", "device", "automount", "timer", "path", "slice", "scope",
    ]

    /// Whether `name` is a unit name systemd accepts (unit_name_is_valid): shorter than 256 bytes; a prefix of
    /// letters, digits and `:-_.\` before a known type; plain (`foo.service`) or, when `allowInstance`, an instance
    /// (`foo@bar.service`), never a template (`foo@.service`).
    static func isValidUnitName(_ name: Substring, allowInstance: Bool) -> Bool {
        guard !name.isEmpty, name.utf8.count < 256, let dot = name.lastIndex(of: "."), dot != name.startIndex,
            unitTypes.contains(name[name.index(after: dot)...])
        else { return false }
        var at: String.Index?
        for index in name[..<dot].indices {
            let character = name[index]
            if character == "@" {
                if at == nil { at = index }
                continue
            }
            guard character.isASCII, character.isLetter || character.isNumber || ":-_.\\".contains(character) else {
                return false
            }
        }
        guard let at else { return true }
        return allowInstance && at != name.startIndex && name.index(after: at) < dot
    }

    /// The contents of a small file of `/proc`, read a page at a time (a connection's lookup reads two files of some
    /// dozens of bytes); nil past 64 KiB, which no list of groups reaches (a path is at most 4 KiB per hierarchy),
    /// rather than a path cut short.
    private static func read(_ path: String) -> String? {
        let descriptor = POSIX.open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { POSIX.close(descriptor) }
        var contents: [UInt8] = []
        let complete = withUnsafeTemporaryAllocation(byteCount: 4096, alignment: 1) { page -> Bool in
            while contents.count <= 65536 {
                let count = POSIX.read(descriptor, page.baseAddress!, page.count)
                if count < 0 && errno == EINTR { continue }
                guard count >= 0 else { return false }
                if count == 0 { return true }
                contents += UnsafeRawBufferPointer(rebasing: page[..<count])
            }
            return false
        }
        return complete ? String(decoding: contents, as: UTF8.self) : nil
    }
}
