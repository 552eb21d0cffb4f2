#if os(Linux)
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Tells the service manager how the service is (`READY=1`, `STATUS=…`, `RELOADING=1`, `STOPPING=1`,
/// `WATCHDOG=1`) with a datagram to `$NOTIFY_SOCKET`, as sd_notify(3) does, without libsystemd. Does nothing when
/// the variable is not set (a daemon started from a terminal).
package final class ServiceNotifier: Sendable {
    /// The socket's path; an abstract socket's starts with a zero byte where the variable has `@`.
    private let path: [UInt8]?
    private let descriptor: CInt

    /// A notifier for `$NOTIFY_SOCKET` (`socketPath` for tests).
    package init(socketPath: String? = POSIX.environmentValue("NOTIFY_SOCKET")) {
        var bytes = Array((socketPath ?? "").utf8)
        if bytes.first == UInt8(ascii: "@") { bytes[0] = 0 }
        // Only a path or an abstract name: sd_notify also knows vsock addresses, which no unit of ours uses.
        let fits = bytes.count < MemoryLayout.size(ofValue: sockaddr_un().sun_path)
        let isUsable = !bytes.isEmpty && fits && (bytes[0] == UInt8(ascii: "/") || bytes[0] == 0)
        path = isUsable ? bytes : nil
        descriptor = isUsable ? POSIX.unixDatagramSocket() : -1
    }

    deinit {
        if descriptor >= 0 { close(descriptor) }
    }

    /// Whether a service manager listens.
    package var isPresent: Bool { path != nil }

    /// Sends `state` (lines of `KEY=value`).
    /// - Returns: whether the datagram was sent.
    @discardableResult
    package func send(_ state: String) -> Bool {
        guard let path, descriptor >= 0 else { return false }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.enumerated() { raw[index] = byte }
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + path.count + (path[0] == 0 ? 0 : 1))
        let bytes = Array(state.utf8)
        let sent = bytes.withUnsafeBytes { buffer in
            withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(descriptor, buffer.baseAddress, buffer.count, CInt(MSG_NOSIGNAL), $0, length)
                }
            }
        }
        return sent == bytes.count
    }
}
#endif
