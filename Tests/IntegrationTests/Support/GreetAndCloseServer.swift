import Foundation
import NIOCore
import Synchronization

/// A daemon that misbehaves in one way: it greets each connection, answers its first request `OK` (so a
/// subscription is confirmed), and closes it. A client that reconnects at once after every connection that was
/// made would connect to it hundreds of times a second; it notes when each connection came.
final class GreetAndCloseServer: Sendable {
    let path: String
    private let descriptor: Int32
    private let accepted = Mutex<[ContinuousClock.Instant]>([])

    init(path: String) throws {
        self.path = path
        descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        let bound = try SocketAddress(unixDomainSocketPath: path).withSockAddr { bind(descriptor, $0, socklen_t($1)) }
        guard bound == 0, listen(descriptor, 64) == 0 else {
            close(descriptor)
            throw TestFailure("cannot listen on \(path): errno \(errno)")
        }
        Thread.detachNewThread { [self] in serve() }
    }

    /// When each connection was accepted, in order.
    var connections: [ContinuousClock.Instant] { accepted.withLock { $0 } }

    private func serve() {
        while true {
            let connection = accept(descriptor, nil, nil)
            if connection < 0 {
                if errno == EINTR { continue }
                return
            }
            accepted.withLock { $0.append(.now) }
            // A client that connects and says nothing must not hold the one thread that accepts: after 2 s without a
            // byte the read gives up and the connection is closed like any other.
            var patience = timeval(tv_sec: 2, tv_usec: 0)
            _ = setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &patience, socklen_t(MemoryLayout<timeval>.size))
            let hello = Array("HELLO notifyd 5 max_payload=1048576 max_topic=255 max_line=1024\n".utf8)
            _ = hello.withUnsafeBytes { write(connection, $0.baseAddress, $0.count) }
            // The first request line, answered with its id.
            var line: [UInt8] = []
            var byte: UInt8 = 0
            while read(connection, &byte, 1) == 1, byte != UInt8(ascii: "\n") { line.append(byte) }
            var reply = "OK\n"
            if line.first == UInt8(ascii: "#"), let space = line.firstIndex(of: UInt8(ascii: " ")) {
                reply = String(decoding: line[..<space], as: UTF8.self) + " OK\n"
            }
            _ = Array(reply.utf8).withUnsafeBytes { write(connection, $0.baseAddress, $0.count) }
            close(connection)
        }
    }

    /// Waits until `count` connections came.
    func waitForConnections(_ count: Int, deadline: Duration = .seconds(30)) async throws {
        do {
            try await withDeadline(deadline, waitingFor: "\(count) connections to the greet-and-close server") {
                while self.connections.count < count { try await Task.sleep(for: .milliseconds(5)) }
            }
        } catch {
            // How far it got says whether the client stopped reconnecting or never began.
            throw TestFailure("\(error); \(connections.count) came, at \(connections.map { $0 - connections[0] })")
        }
    }

    deinit {
        shutdown(descriptor, Int32(SHUT_RDWR))
        close(descriptor)
    }
}
