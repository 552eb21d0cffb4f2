import Foundation
import NIOCore
import Synchronization

/// A Unix-socket relay in front of a daemon's socket, to see a conversation and to lose part of it. Each connection
/// made to ``path`` is joined to a new one to ``target`` (refused, by closing it, when nothing listens there), and
/// the bytes are copied both ways by threads of their own. What went each way, over all connections in turn, is an
/// event to wait on (``fromClients``, ``toClients``); ``holdReplies()`` stops what the daemon sends on the
/// connections open now from reaching their clients: replies lost with a connection, as when the daemon dies
/// after doing what it was asked and before its answer is read. When either end of a connection closes, so does
/// the other.
final class SocketRelay: Sendable {
    let path: String
    let target: String
    /// What the clients sent, as the daemon was given it.
    let fromClients = OutputCollector()
    /// What reached the clients from the daemon (not what was held back).
    let toClients = OutputCollector()
    private let listener: Int32
    private let state = Mutex(State())

    private struct State {
        var connections: [Int: Connection] = [:]
        var nextConnection = 0
        var stopped = false
    }

    private struct Connection {
        let client: Int32
        let daemon: Int32
        /// Whether what the daemon sends is dropped instead of passed on.
        var holdsReplies = false
        /// The copying threads still running; the last one out closes both descriptors.
        var running = 2
    }

    /// Relays `path` (made here) to `target`.
    init(path: String, to target: String) throws {
        self.path = path
        self.target = target
        listener = try Self.socket()
        let bound = try SocketAddress(unixDomainSocketPath: path).withSockAddr { bind(listener, $0, socklen_t($1)) }
        guard bound == 0, listen(listener, 64) == 0 else {
            close(listener)
            throw TestFailure("cannot listen on \(path): errno \(errno)")
        }
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    /// From now on, what the daemon sends on each connection open now is dropped; connections made later pass
    /// everything.
    func holdReplies() {
        state.withLock { state in
            for id in state.connections.keys { state.connections[id]?.holdsReplies = true }
        }
    }

    /// Closes the relay and every connection through it; nothing is accepted after.
    func stop() {
        let open = state.withLock { state in
            state.stopped = true
            return Array(state.connections.values)
        }
        _ = shutdown(listener, Int32(SHUT_RDWR))
        for connection in open {
            _ = shutdown(connection.client, Int32(SHUT_RDWR))
            _ = shutdown(connection.daemon, Int32(SHUT_RDWR))
        }
        unlink(path)
    }

    private static func socket() throws -> Int32 {
        // Close-on-exec: a child a test starts must not keep a connection through the relay open.
        let descriptor = Foundation.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw TestFailure("socket failed: errno \(errno)") }
        return descriptor
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                close(listener)
                return
            }
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)
            guard let daemon = try? Self.socket() else {
                close(client)
                continue
            }
            let connected = (try? SocketAddress(unixDomainSocketPath: target).withSockAddr { connect(daemon, $0, socklen_t($1)) }) ?? -1
            let id = state.withLock { state -> Int? in
                guard connected == 0, !state.stopped else { return nil }
                state.nextConnection += 1
                state.connections[state.nextConnection] = Connection(client: client, daemon: daemon)
                return state.nextConnection
            }
            guard let id else {
                // Nothing listens there (the daemon is restarting): the client sees its connection end.
                close(daemon)
                close(client)
                continue
            }
            Thread.detachNewThread { [self] in copy(id, from: client, to: daemon, into: fromClients, holdable: false) }
            Thread.detachNewThread { [self] in copy(id, from: daemon, to: client, into: toClients, holdable: true) }
        }
    }

    /// Copies what `source` sends to `destination` until either end closes, then closes the connection both ways.
    private func copy(_ id: Int, from source: Int32, to destination: Int32, into seen: OutputCollector, holdable: Bool) {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        loop: while true {
            let count = buffer.withUnsafeMutableBytes { recv(source, $0.baseAddress, $0.count, 0) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            if holdable, state.withLock({ $0.connections[id]?.holdsReplies ?? false }) { continue }
            var offset = 0
            while offset < count {
                let written = buffer[offset..<count].withUnsafeBytes { send(destination, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else { break loop }
                offset += written
            }
            seen.record(Array(buffer[..<count]))
        }
        _ = shutdown(source, Int32(SHUT_RDWR))
        _ = shutdown(destination, Int32(SHUT_RDWR))
        let last = state.withLock { state -> Connection? in
            state.connections[id]?.running -= 1
            guard state.connections[id]?.running == 0 else { return nil }
            return state.connections.removeValue(forKey: id)
        }
        if let last {
            close(last.client)
            close(last.daemon)
        }
    }
}
