import Foundation
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#endif

/// A loopback TCP relay to a port, that a test can cut (every connection through it closed, new ones refused)
/// and restore: one host's link to a NATS server going down and coming back, while the others keep theirs.
public final class TCPRelay: Sendable {
    /// The port clients connect to instead of the target's.
    public let port: Int
    private let target: Int
    private let listener: Int32
    private let state = NIOLockedValueBox(State())

    private struct State {
        var isCut = false
        var open: [Int32] = []
        var isClosed = false
    }

    /// `nats://127.0.0.1:<port>`.
    public var url: String { "nats://127.0.0.1:\(port)" }

    /// Relays a free loopback port to `target`.
    public init(to target: Int) throws {
        self.target = target
        port = try NATSServerProcess.freePort()
        listener = try Self.listen(on: port)
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    /// Closes every connection through the relay, and refuses new ones until ``restore()``.
    public func cut() {
        let open = state.withLockedValue { state in
            state.isCut = true
            defer { state.open.removeAll() }
            return state.open
        }
        for descriptor in open { shutdown(descriptor, Int32(SHUT_RDWR)) }
    }

    /// Takes connections again.
    public func restore() {
        state.withLockedValue { $0.isCut = false }
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 {
                if state.withLockedValue({ $0.isClosed }) { return }
                continue
            }
            if state.withLockedValue({ $0.isCut }) {
                close(client)
                continue
            }
            guard let server = try? Self.connect(to: target) else {
                close(client)
                continue
            }
            state.withLockedValue { $0.open += [client, server] }
            for (from, to) in [(client, server), (server, client)] {
                Thread { Self.pump(from: from, to: to) }.start()
            }
        }
    }

    private static func pump(from: Int32, to: Int32) {
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(from, $0.baseAddress, $0.count) }
            if count <= 0 { break }
            var sent = 0
            while sent < count {
                let written = buffer.withUnsafeBytes { write(to, $0.baseAddress! + sent, count - sent) }
                if written <= 0 { break }
                sent += written
            }
            if sent < count { break }
        }
        shutdown(from, Int32(SHUT_RDWR))
        shutdown(to, Int32(SHUT_RDWR))
    }

    private static func listen(on port: Int) throws -> Int32 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var yes: Int32 = 1
        setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = loopback(port)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        guard bound, Glibc.listen(descriptor, 64) == 0 else { throw NATSServerProcess.Failure(description: "relay: bind or listen: errno \(errno)") }
        return descriptor
    }

    private static func connect(to port: Int) throws -> Int32 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = loopback(port)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        guard connected else {
            close(descriptor)
            throw NATSServerProcess.Failure(description: "relay: connect: errno \(errno)")
        }
        return descriptor
    }

    private static func loopback(_ port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        return address
    }

    deinit {
        state.withLockedValue { $0.isClosed = true }
        cut()
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }
}
