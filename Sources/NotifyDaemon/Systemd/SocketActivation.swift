import CSystemd

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The listening socket systemd passed in (`LISTEN_FDS`, `notifyd.socket`), if the daemon was socket-activated.
enum SocketActivation {
    /// The inherited listening Unix stream socket, or nil when none was passed.
    /// - Throws: when sockets were passed but not exactly one listening Unix stream socket.
    static func inheritedListener() throws -> CInt? {
        // Unset LISTEN_* so nothing this process starts believes the sockets are meant for it.
        let count = sd_listen_fds(1)
        if count == 0 { return nil }
        guard count > 0 else {
            throw SocketFileError(description: "cannot read the sockets passed by systemd (LISTEN_FDS): error \(-count)")
        }
        let first = CInt(SD_LISTEN_FDS_START)
        guard count == 1, sd_is_socket_unix(first, CInt(SOCK_STREAM.rawValue), 1, nil, 0) > 0 else {
            throw SocketFileError(
                description: "systemd passed \(count) socket(s); notifyd needs exactly one listening Unix stream socket (ListenStream= with a path)"
            )
        }
        return first
    }
}
