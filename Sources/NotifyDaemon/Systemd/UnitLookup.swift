import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The systemd unit a process runs in (``CgroupUnit``, as `sd_pid_get_unit` reads it): who published, as the
/// kernel's cgroups say.
///
/// The kernel names a connection's peer by pid, and a pid is looked up after the fact: by then the peer may have
/// exited and its pid been given to a process of another unit, which would lend that unit to the connection. So
/// the lookup is checked against the peer itself: with a pidfd of it (`SO_PEERPIDFD`, Linux 6.5), the unit counts
/// only if the peer was still running after the lookup (a pid is not reused while its process runs); without one,
/// only if the process at that pid runs as the peer's uid. A pid of 0 (a peer in a PID namespace the daemon cannot
/// see into) is never looked up.
enum UnitLookup {
    /// The unit of the peer of `channel`, whose kernel credentials are `pid` and `uid`; nil when it runs in none, or
    /// when that cannot be told for sure.
    static func unit(ofPeerOf channel: any Channel, pid: Int32, uid: UInt32) -> String? {
        guard pid > 0 else { return nil }
        let pidfd = peerPidfd(of: channel)
        defer { if let pidfd { close(pidfd) } }
        return checkedUnit(
            pid: pid,
            uid: uid,
            hasPidfd: pidfd != nil,
            lookup: unit(of:),
            peerHasExited: { pidfd.map(hasExited) ?? true },
            ownerOf: effectiveUID(of:)
        )
    }

    /// The decision, apart from the system calls it needs: the unit `lookup` finds for `pid`, if the peer is known to
    /// be the process that runs at `pid`.
    static func checkedUnit(
        pid: Int32,
        uid: UInt32,
        hasPidfd: Bool,
        lookup: (Int32) -> String?,
        peerHasExited: () -> Bool,
        ownerOf: (Int32) -> UInt32?
    ) -> String? {
        guard pid > 0 else { return nil }
        if !hasPidfd {
            guard ownerOf(pid) == uid, let unit = lookup(pid), ownerOf(pid) == uid else { return nil }
            return unit
        }
        guard let unit = lookup(pid), !peerHasExited() else { return nil }
        return unit
    }

    /// The unit of `pid`, or nil when it runs in none (a login session, a container) or is already gone.
    static func unit(of pid: Int32) -> String? {
        CgroupUnit.unit(ofProcess: pid)
    }

    /// A pidfd of the connection's peer (`SO_PEERPIDFD`), or nil where the kernel has none.
    private static func peerPidfd(of channel: any Channel) -> CInt? {
        guard let provider = channel as? any SocketOptionProvider else { return nil }
        let future: EventLoopFuture<CInt> = provider.unsafeGetSocketOption(
            level: SocketOptionLevel(SOL_SOCKET),
            name: SocketOptionName(77)  // SO_PEERPIDFD, Linux 6.5; Glibc's module does not export the name
        )
        var result: Result<CInt, any Error>?
        future.assumeIsolated().whenComplete { result = $0 }
        guard let descriptor = try? result?.get(), descriptor >= 0 else { return nil }
        return descriptor
    }

    /// Whether the process of `pidfd` has exited: its pidfd is readable then.
    private static func hasExited(_ pidfd: CInt) -> Bool {
        var entry = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, 0) != 0
    }

    /// The effective uid of the process at `pid`, from `/proc`; nil when there is none.
    private static func effectiveUID(of pid: Int32) -> UInt32? {
        guard let file = fopen("/proc/\(pid)/status", "r") else { return nil }
        defer { fclose(file) }
        var line: UnsafeMutablePointer<CChar>?
        var capacity = 0
        defer { free(line) }
        while getline(&line, &capacity, file) > 0, let line {
            let text = String(cString: line)
            guard text.hasPrefix("Uid:") else { continue }
            // Uid: real effective saved filesystem
            let fields = text.dropFirst(4).split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" })
            return fields.count > 1 ? UInt32(fields[1]) : nil
        }
        return nil
    }
}
