package import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Connecting to a Unix stream socket by path: what the client library, `notify bench` and `notifyd --reload` share.
package enum UnixSocket {
    /// Connects a new socket (closed on exec, never raising SIGPIPE) to `path`.
    /// - Throws: an `IOError` with the `errno` of what failed; `ENAMETOOLONG` when `path` cannot be a socket address.
    package static func connect(to path: String, nonBlocking: Bool = false) throws(IOError) -> CInt {
        guard let address = try? SocketAddress(unixDomainSocketPath: path) else {
            throw IOError(errnoCode: ENAMETOOLONG, reason: "the socket path \(path) is longer than a Unix socket path may be")
        }
        let descriptor = POSIX.unixStreamSocket()
        guard descriptor >= 0 else { throw IOError(errnoCode: errno, reason: "socket") }
        if nonBlocking { _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK) }
        guard address.withSockAddr({ Self.connect(descriptor, $0, socklen_t($1)) }) == 0 else {
            let code = errno
            POSIX.close(descriptor)
            throw IOError(errnoCode: code, reason: "connect")
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
