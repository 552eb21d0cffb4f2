#if canImport(Glibc)
import Glibc
#endif
import Foundation
import NIOCore

/// The user on the other end of a loopback TCP connection: the kernel lists every TCP socket with its owner's uid in
/// `/proc/net/tcp` and `/proc/net/tcp6`, and the client's socket is the one whose local address is the connection's
/// remote one and whose remote address is its local one. So the gateway's bounds can hold per local user, where
/// every local user shares one address range.
enum LoopbackPeer {
    /// The uid owning the client end of the connection from `remote` to `local`; nil when the kernel's lists do not
    /// say (not loopback, not TCP, or the lists cannot be read).
    static func uid(remote: SocketAddress, local: SocketAddress) -> UInt32? {
        guard let remoteKey = key(remote), let localKey = key(local) else { return nil }
        let list = remote.protocol == .inet ? "/proc/self/net/tcp" : "/proc/self/net/tcp6"
        guard let bytes = contents(of: list) else { return nil }
        // The two addresses are a line's second and third fields, one space apart: found by a byte search, and only
        // that line split. Splitting every line cost a gateway with 10,000 loopback connections seconds per accept.
        let needle = Array((remoteKey + " " + localKey).utf8)
        return bytes.withUnsafeBytes { haystack -> UInt32? in
            guard let offset = needle.withUnsafeBytes({ LoopbackPeer.firstIndex(of: $0, in: haystack) }) else { return nil }
            var start = offset
            while start > 0, haystack[start - 1] != UInt8(ascii: "\n") { start -= 1 }
            var end = offset
            while end < haystack.count, haystack[end] != UInt8(ascii: "\n") { end += 1 }
            let line = String(decoding: haystack[start..<end], as: UTF8.self)
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count > 7, fields[1] == remoteKey[...], fields[2] == localKey[...] else { return nil }
            return UInt32(fields[7])
        }
    }

    /// Where `needle` first is in `haystack`: each place its first byte is (memchr), compared whole there (memcmp).
    static func firstIndex(of needle: UnsafeRawBufferPointer, in haystack: UnsafeRawBufferPointer) -> Int? {
        guard let first = needle.first, let base = haystack.baseAddress, let pattern = needle.baseAddress else { return nil }
        var at = 0
        while haystack.count - at >= needle.count {
            guard let hit = memchr(base + at, Int32(first), haystack.count - at - needle.count + 1) else { return nil }
            let offset = base.distance(to: UnsafeRawPointer(hit))
            if memcmp(base + offset, pattern, needle.count) == 0 { return offset }
            at = offset + 1
        }
        return nil
    }

    /// The whole of a file of /proc, read until its end: its size says 0, and it comes a page or so at a time.
    private static func contents(of path: String) -> [UInt8]? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count >= 0 else { return nil }
            if count == 0 { break }
            bytes += chunk[0..<count]
            // Bounded: a host with more sockets than this is not one whose gateway counts by uid.
            guard bytes.count <= 64 << 20 else { return nil }
        }
        return bytes
    }

    /// `address` as the kernel writes it in those lists: each 32-bit word of the address in the machine's byte order,
    /// in hexadecimal, then the port.
    static func key(_ address: SocketAddress) -> String? {
        guard let text = address.ipAddress, let port = address.port else { return nil }
        let family = address.protocol == .inet ? AF_INET : AF_INET6
        var bytes = [UInt8](repeating: 0, count: family == AF_INET ? 4 : 16)
        guard inet_pton(family, text, &bytes) == 1 else { return nil }
        var key = ""
        for word in stride(from: 0, to: bytes.count, by: 4) {
            // The kernel prints the word as it lies in memory, read as a native integer.
            key += hex(bytes[word..<word + 4].withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) }, digits: 8)
        }
        return key + ":" + hex(UInt32(port), digits: 4)
    }

    private static func hex(_ value: UInt32, digits: Int) -> String {
        let text = String(value, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, digits - text.count)) + text
    }
}
