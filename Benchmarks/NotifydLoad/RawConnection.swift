import Foundation

/// A blocking Unix-socket connection for load generation: bytes out as fast as the daemon takes them, bytes in as
/// they come, no framing library in between (what the C harness in Benchmarks/Anchors/harness does too).
final class RawConnection: @unchecked Sendable {
    let descriptor: Int32

    init(path: String) throws {
        descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { throw LoadError("socket path too long") }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard result == 0 else {
            close(descriptor)
            throw LoadError("connect to \(path): \(String(cString: strerror(errno)))")
        }
    }

    deinit { close(descriptor) }

    func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Foundation.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { throw LoadError("send: \(String(cString: strerror(errno)))") }
            offset += written
        }
    }

    func send(_ text: String) throws { try send(Array(text.utf8)) }

    /// Reads until `done` says so for the bytes read in the last call (and everything before, which it keeps
    /// track of itself); returns false if the connection ends first.
    func read(until done: (UnsafeRawBufferPointer) -> Bool) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 256 << 10)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { return false }
            if buffer.withUnsafeBytes({ done(UnsafeRawBufferPointer(rebasing: $0[..<count])) }) { return true }
        }
    }

    /// Reads until a line equal to `line` has been received.
    func read(untilLine line: String) -> Bool {
        let wanted = Array(("\n" + line + "\n").utf8)
        var tail: [UInt8] = [0x0A]
        return read { chunk in
            tail.append(contentsOf: chunk.suffix(wanted.count))
            tail = Array(tail.suffix(wanted.count))
            return tail.elementsEqual(wanted)
        }
    }

    /// Makes a read that waits longer than `seconds` for bytes end as if the connection had.
    func setReceiveTimeout(seconds: Int) {
        var timeout = timeval(tv_sec: seconds, tv_usec: 0)
        _ = setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    func shutdown() { _ = Foundation.shutdown(descriptor, Int32(SHUT_RDWR)) }
}
