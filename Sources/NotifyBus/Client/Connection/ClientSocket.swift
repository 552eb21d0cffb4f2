import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import NotifyProtocol
import NotifySystem

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
        do {
            return try UnixSocket.connect(to: path, nonBlocking: nonBlocking)
        } catch where error.errnoCode == ENAMETOOLONG {
            throw NotifyClientError(.invalidInput, "the socket path \(path) is longer than a Unix socket path may be")
        } catch {
            throw NotifyClientError.connecting(to: path, errno: error.errnoCode)
        }
    }
}
