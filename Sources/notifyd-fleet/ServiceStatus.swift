#if canImport(Glibc)
import Glibc
#endif

/// Tells systemd how the service is (`READY=1`, `STATUS=…`, `RELOADING=1`, `STOPPING=1`) on `$NOTIFY_SOCKET`, as
/// sd_notify(3) does, without libsystemd (only the daemon links it). Does nothing when not run by systemd.
final class ServiceStatus: Sendable {
    private let path: [UInt8]?
    private let descriptor: Int32

    init() {
        let value = getenv("NOTIFY_SOCKET").map { String(cString: $0) } ?? ""
        path = value.isEmpty ? nil : Array(value.utf8)
        descriptor = path == nil ? -1 : socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    }

    func ready() {
        send("READY=1")
    }

    /// Sends `text` (lines of `KEY=value`).
    func send(_ text: String) {
        guard let path, descriptor >= 0, path.count < MemoryLayout.size(ofValue: sockaddr_un().sun_path) else { return }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.enumerated() { raw[index] = byte }
            // An abstract socket: its name starts with a zero byte where the variable has `@`.
            if path.first == UInt8(ascii: "@") { raw[0] = 0 }
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + path.count)
        var bytes = Array(text.utf8)
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(descriptor, &bytes, bytes.count, 0, $0, length) }
        }
    }
}
