import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The client's connection to the daemon, made here and handed to NIO connected, because NIO makes its sockets
/// without close-on-exec: a program that runs others (a service's hooks, a shell's commands) would hand its
/// connection to every child, which then keeps it open, and its subscriptions delivering to nobody, after the
/// program closed it.
enum CloseOnExecSocket {
    /// A non-blocking socket connected to `path`, closed on exec; throws NIO's `IOError` with the `connect` errno,
    /// as NIO's own connect would. A Unix socket connects at once or not at all: a daemon whose backlog is full
    /// makes it fail with `EAGAIN` rather than wait.
    static func connected(to path: String) throws -> CInt {
        let address = try SocketAddress(unixDomainSocketPath: path)
        let descriptor = POSIX.unixStreamSocket()
        guard descriptor >= 0 else { throw IOError(errnoCode: errno, reason: "socket") }
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
        let result = address.withSockAddr { connect(descriptor, $0, socklen_t($1)) }
        guard result == 0 else {
            let code = errno
            _ = POSIX.close(descriptor)
            throw IOError(errnoCode: code, reason: "connect")
        }
        return descriptor
    }
}
