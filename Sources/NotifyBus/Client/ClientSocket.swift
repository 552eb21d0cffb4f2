import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import NotifyProtocol

/// Every client's connection to the daemon (``NotifyConnection``, ``NotifyClient``, the bench's connections), made
/// here and closed on exec. ``NotifyClient`` hands it to NIO connected, because NIO makes its sockets without
/// close-on-exec: a program that runs others (a service's hooks, a shell's commands) would hand its connection to
/// every child, which then keeps it open, and its subscriptions delivering to nobody, after the program closed it.
package enum ClientSocket {
    /// A socket connected to the daemon at `path`, closed on exec.
    ///
    /// A Unix socket connects at once or not at all: blocking, `connect` waits while the daemon's backlog is full;
    /// `nonBlocking`, it fails with `EAGAIN` instead.
    /// - Throws: ``NotifyClientError``: the path is too long, no socket can be made, or what
    ///   ``NotifyClientError/connecting(to:errno:detail:)`` says of the `connect` errno.
    package static func connect(to path: String, nonBlocking: Bool = false) throws(NotifyClientError) -> CInt {
        guard let address = try? SocketAddress(unixDomainSocketPath: path) else {
            throw NotifyClientError(.invalidInput, "the socket path \(path) is longer than a Unix socket path may be")
        }
        let descriptor = POSIX.unixStreamSocket()
        guard descriptor >= 0 else {
            throw NotifyClientError(.unreachable, "cannot create a socket: \(String(cString: strerror(errno)))")
        }
        if nonBlocking { _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK) }
        guard address.withSockAddr({ Self.connect(descriptor, $0, socklen_t($1)) }) == 0 else {
            let code = errno
            _ = POSIX.close(descriptor)
            throw NotifyClientError.connecting(to: path, errno: code)
        }
        return descriptor
    }

    private static func connect(_ descriptor: CInt, _ address: UnsafePointer<sockaddr>, _ length: socklen_t) -> CInt {
        #if canImport(Glibc)
        Glibc.connect(descriptor, address, length)
        #elseif canImport(Musl)
        Musl.connect(descriptor, address, length)
        #else
        Darwin.connect(descriptor, address, length)
        #endif
    }
}
