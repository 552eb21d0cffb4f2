import Foundation
import NIOCore

/// A plain Unix-socket (or loopback TCP) connection for sending arbitrary bytes, well-formed or not, and reading
/// what comes back.
/// Used by one test at a time; its blocking reads run on their own thread (see `onOwnThread`).
final class RawSocket: @unchecked Sendable {
    private let descriptor: Int32
    private(set) var received: [UInt8] = []

    init(path: String) throws {
        // Close-on-exec: a child another test starts meanwhile must not keep this connection open after it closes.
        descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        let result = try SocketAddress(unixDomainSocketPath: path).withSockAddr { connect(descriptor, $0, socklen_t($1)) }
        guard result == 0 else { throw TestFailure("connect to \(path) failed: errno \(errno)") }
    }

    /// A TCP connection to `host`:`port`, from the loopback address `source` (any of 127.0.0.0/8), with a receive
    /// buffer of `receiveBuffer` bytes if given (a reader that stops then holds little in its kernel).
    init(host: String = "127.0.0.1", port: Int, source: String? = nil, receiveBuffer: Int? = nil) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        if var size = receiveBuffer.map(Int32.init) {
            setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        if let source {
            let bound = try SocketAddress(ipAddress: source, port: 0).withSockAddr { bind(descriptor, $0, socklen_t($1)) }
            guard bound == 0 else { throw TestFailure("bind to \(source) failed: errno \(errno)") }
        }
        let result = try SocketAddress(ipAddress: host, port: port).withSockAddr { connect(descriptor, $0, socklen_t($1)) }
        guard result == 0 else { throw TestFailure("connect to \(host):\(port) failed: errno \(errno)") }
    }

    deinit { close(descriptor) }

    func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Foundation.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard written > 0 else { throw TestFailure("send failed: errno \(errno)") }
            offset += written
        }
    }

    func send(_ text: String) throws { try send(Array(text.utf8)) }

    /// Sends `chunk` again and again until the peer stops taking bytes (none go for `quiet`, an eternity for a
    /// daemon that reads) or `limit` bytes went.
    /// - Returns: the bytes sent, and whether sending stopped because the peer stopped reading.
    func sendUntilPeerStopsReading(_ chunk: [UInt8], limit: Int, quiet: Duration = .seconds(3)) -> (sent: Int, stopped: Bool) {
        var interval = timeval(tv_sec: Int(quiet.components.seconds), tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &interval, socklen_t(MemoryLayout<timeval>.size))
        defer {
            var none = timeval()
            setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &none, socklen_t(MemoryLayout<timeval>.size))
        }
        var sent = 0
        while sent < limit {
            var offset = 0
            while offset < chunk.count {
                let written = chunk[offset...].withUnsafeBytes { Foundation.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if written < 0 && errno == EINTR { continue }
                if written <= 0 { return (sent + offset, errno == EAGAIN || errno == EWOULDBLOCK) }
                offset += written
            }
            sent += chunk.count
        }
        return (sent, false)
    }

    /// Ends the connection both ways at once, which also wakes a `send` blocked on another thread.
    func shutdown() {
        _ = Foundation.shutdown(descriptor, Int32(SHUT_RDWR))
    }

    /// Ends what this side sends (the peer reads end of file) and goes on reading what the peer sends.
    func shutdownWriting() {
        _ = Foundation.shutdown(descriptor, Int32(SHUT_WR))
    }

    /// Reads until `condition` holds for all bytes received, the peer closes, or `timeout` passes.
    /// - Returns: whether the condition holds.
    @discardableResult
    func read(timeout: Duration = .seconds(15), until condition: @escaping @Sendable ([UInt8]) -> Bool) async -> Bool {
        (try? await onOwnThread { self.readBlocking(timeout: timeout, until: condition) }) ?? false
    }

    private func readBlocking(timeout: Duration, until condition: ([UInt8]) -> Bool) -> Bool {
        let deadline = ContinuousClock.now + timeout
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while !condition(received) {
            let remaining = deadline - ContinuousClock.now
            guard remaining > .zero else { return false }
            var interval = timeval(tv_sec: Int(remaining.components.seconds), tv_usec: Int(remaining.components.attoseconds / 1_000_000_000_000) + 1)
            setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &interval, socklen_t(MemoryLayout<timeval>.size))
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count <= 0 { return condition(received) }
            received += buffer[..<count]
        }
        return true
    }

    /// The lines received so far (payload lines included).
    var lines: [String] { String(decoding: received, as: UTF8.self).split(separator: "\n").map(String.init) }

    /// Whether the daemon closes the connection (reading reaches end of file) within `timeout`; what arrives
    /// before that is kept.
    func isClosedByPeer(timeout: Duration = .seconds(15)) async -> Bool {
        (try? await onOwnThread { self.isClosedByPeerBlocking(timeout: timeout) }) ?? false
    }

    private func isClosedByPeerBlocking(timeout: Duration) -> Bool {
        var interval = timeval(tv_sec: Int(timeout.components.seconds), tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &interval, socklen_t(MemoryLayout<timeval>.size))
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count == 0 { return true }
            if count < 0 { return false }
            received += buffer[..<count]
        }
    }
}
