import Foundation
import NIOCore

/// Plays systemd's part of `sd_notify`: a datagram socket whose path goes into the daemon's `$NOTIFY_SOCKET`, and
/// the messages the daemon sends to it.
/// Used by one test at a time; its blocking reads run on their own thread (see `onOwnThread`).
final class NotifySocketListener: @unchecked Sendable {
    let path: String
    private let descriptor: Int32
    private(set) var messages: [String] = []

    init(path: String) throws {
        self.path = path
        descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        let bound = try SocketAddress(unixDomainSocketPath: path).withSockAddr { bind(descriptor, $0, socklen_t($1)) }
        guard bound == 0 else { throw TestFailure("cannot bind \(path): errno \(errno)") }
    }

    deinit { close(descriptor) }

    /// Reads messages until one satisfies `condition` (it is returned), or fails after `timeout`.
    @discardableResult
    func wait(for what: String, timeout: Duration = .seconds(20), _ condition: @escaping @Sendable (String) -> Bool) async throws -> String {
        try await onOwnThread { try self.waitBlocking(for: what, timeout: timeout, condition) }
    }

    private func waitBlocking(for what: String, timeout: Duration, _ condition: (String) -> Bool) throws -> String {
        let deadline = ContinuousClock.now + timeout
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let remaining = deadline - ContinuousClock.now
            guard remaining > .zero else { throw TestFailure("no \(what) within \(timeout); got \(messages)") }
            var interval = timeval(tv_sec: Int(remaining.components.seconds), tv_usec: Int(remaining.components.attoseconds / 1_000_000_000_000) + 1)
            setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &interval, socklen_t(MemoryLayout<timeval>.size))
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { continue }
            let message = String(decoding: buffer[..<count], as: UTF8.self)
            messages.append(message)
            if condition(message) { return message }
        }
    }
}

/// The value of `NAME=` in an sd_notify message.
func field(_ name: String, in message: String) -> String? {
    message.split(separator: "\n").first { $0.hasPrefix(name + "=") }.map { String($0.dropFirst(name.count + 1)) }
}
