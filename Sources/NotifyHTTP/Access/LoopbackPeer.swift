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
        // The kernel's answer for the one socket, where it gives it; the lists otherwise (a kernel without
        // inet_diag, a sandbox that refuses netlink).
        if let uid = askKernel(remote: remote, local: local) { return uid }
        return fromLists(remote: remote, local: local)
    }

    /// The owner of the client's socket, asked of the kernel for that socket alone (NETLINK_SOCK_DIAG, an exact
    /// inet_diag lookup): a few system calls, where reading /proc/net/tcp makes the kernel write out every TCP socket
    /// of the host, at each connection (3,000 loopback streams took two minutes to open).
    static func askKernel(remote: SocketAddress, local: SocketAddress) -> UInt32? {
        guard let client = rawAddress(remote), let server = rawAddress(local), let clientPort = remote.port, let serverPort = local.port,
            client.family == server.family
        else { return nil }
        let descriptor = socket(AF_NETLINK, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 4 /* NETLINK_SOCK_DIAG */)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var timeout = timeval(tv_sec: 1, tv_usec: 0)
        _ = setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))

        // struct nlmsghdr (16 bytes), then struct inet_diag_req_v2 (56): the kernel's ABI, in its byte order but for
        // the ports (network order).
        var request = [UInt8](repeating: 0, count: 72)
        func put<T: FixedWidthInteger>(_ value: T, at offset: Int) {
            withUnsafeBytes(of: value) { request.replaceSubrange(offset..<offset + $0.count, with: $0) }
        }
        put(UInt32(72), at: 0)  // nlmsg_len
        put(UInt16(20), at: 4)  // SOCK_DIAG_BY_FAMILY
        put(UInt16(1), at: 6)  // NLM_F_REQUEST: one socket, not a dump
        put(UInt32(1), at: 8)  // nlmsg_seq
        request[16] = UInt8(client.family)
        request[17] = UInt8(IPPROTO_TCP)
        put(UInt32.max, at: 20)  // idiag_states: any
        put(UInt16(clientPort).bigEndian, at: 24)  // the client's socket: its source is the connection's remote end
        put(UInt16(serverPort).bigEndian, at: 26)
        request.replaceSubrange(28..<28 + client.bytes.count, with: client.bytes)
        request.replaceSubrange(44..<44 + server.bytes.count, with: server.bytes)
        put(UInt32.max, at: 64)  // INET_DIAG_NOCOOKIE
        put(UInt32.max, at: 68)
        let sent = request.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, 0) }
        guard sent == request.count else { return nil }

        var reply = [UInt8](repeating: 0, count: 8_192)
        let received = reply.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
        // nlmsghdr, then struct inet_diag_msg: 4 bytes, its sockid (48), expires, rqueue, wqueue (12), then the uid.
        guard received >= 84 else { return nil }
        return reply.withUnsafeBytes { bytes -> UInt32? in
            guard bytes.loadUnaligned(fromByteOffset: 4, as: UInt16.self) == 20,
                Int(bytes.loadUnaligned(fromByteOffset: 0, as: UInt32.self)) >= 84
            else { return nil }
            return bytes.loadUnaligned(fromByteOffset: 80, as: UInt32.self)
        }
    }

    /// `address`'s family and bytes, as inet_pton writes them.
    private static func rawAddress(_ address: SocketAddress) -> (family: Int32, bytes: [UInt8])? {
        guard let text = address.ipAddress else { return nil }
        let family = address.protocol == .inet ? AF_INET : AF_INET6
        var bytes = [UInt8](repeating: 0, count: family == AF_INET ? 4 : 16)
        guard inet_pton(family, text, &bytes) == 1 else { return nil }
        return (family, bytes)
    }

    /// The same, from `/proc/net/tcp` or `tcp6`.
    static func fromLists(remote: SocketAddress, local: SocketAddress) -> UInt32? {
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
