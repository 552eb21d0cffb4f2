import NotifySystem

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The listening socket systemd passed in (`LISTEN_FDS`, `notifyd.socket`), if the daemon was socket-activated: read
/// as sd_listen_fds(3) does, without libsystemd.
enum SocketActivation {
    /// The first descriptor systemd passes (`SD_LISTEN_FDS_START`).
    static let firstDescriptor: CInt = 3

    /// The inherited listening Unix stream socket, or nil when none was passed.
    /// - Throws: when sockets were passed but not exactly one listening Unix stream socket.
    static func inheritedListener() throws -> CInt? {
        let count = try passedCount(
            listenPID: POSIX.environmentValue("LISTEN_PID"),
            listenFDs: POSIX.environmentValue("LISTEN_FDS"),
            ownPID: getpid()
        )
        // Unset LISTEN_* so nothing this process starts believes the sockets are meant for it.
        for name in ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"] { unsetenv(name) }
        if count == 0 { return nil }
        // Checked before anything is done per descriptor: the count is the environment's, any number up to 2^31.
        guard count == 1, isListeningUnixStreamSocket(firstDescriptor) else {
            throw SocketFileError(
                description: "systemd passed \(count) socket(s); notifyd needs exactly one listening Unix stream socket (ListenStream= with a path)"
            )
        }
        _ = fcntl(firstDescriptor, F_SETFD, FD_CLOEXEC)
        return firstDescriptor
    }

    /// How many descriptors the environment says were passed to this process: 0 when none were, or they were meant
    /// for another process (`LISTEN_PID` is not ours, as after a fork).
    /// - Throws: when the variables are not numbers, or name more descriptors than a process can have.
    static func passedCount(listenPID: String?, listenFDs: String?, ownPID: Int32) throws -> Int {
        guard let listenPID else { return 0 }
        guard let pid = Int32(listenPID), pid > 0 else {
            throw SocketFileError(description: "cannot read the sockets passed by systemd: LISTEN_PID=\(listenPID) is not a process id")
        }
        guard pid == ownPID, let listenFDs else { return 0 }
        // At most what a descriptor number can reach after the first.
        guard let count = Int(listenFDs), count >= 0, count <= Int(Int32.max - firstDescriptor) else {
            throw SocketFileError(description: "cannot read the sockets passed by systemd: LISTEN_FDS=\(listenFDs) is not a count")
        }
        return count
    }

    /// Whether `descriptor` is a Unix stream socket that listens (sd_is_socket_unix(3) with `listening` 1).
    private static func isListeningUnixStreamSocket(_ descriptor: CInt) -> Bool {
        var info = stat()
        guard fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFSOCK else { return false }
        func option(_ name: CInt) -> CInt? {
            var value: CInt = 0
            var length = socklen_t(MemoryLayout<CInt>.size)
            return getsockopt(descriptor, SOL_SOCKET, name, &value, &length) == 0 ? value : nil
        }
        #if canImport(Glibc)
        let stream = CInt(SOCK_STREAM.rawValue)
        #else
        let stream = SOCK_STREAM
        #endif
        guard option(SO_TYPE) == stream, option(SO_ACCEPTCONN) == 1 else { return false }
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        return named == 0 && address.ss_family == sa_family_t(AF_UNIX)
    }
}
