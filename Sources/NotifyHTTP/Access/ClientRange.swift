#if canImport(Glibc)
import Glibc
#endif
public import NIOCore

/// What the gateway's bounds per client count by: a client's address widened to the range one party holds.
///
/// Every loopback address is one range: any local user may bind 127.0.0.2, 127.0.0.3, … as well as 127.0.0.1, so
/// bounds per exact address would let one user hold every connection; a connection over loopback is counted by the
/// local user at its other end instead (see ``key(of:local:)``). An IPv6 client is counted by its /64, the block one
/// host is given; an IPv4 client by its address.
public enum ClientRange {
    /// The key a connection from `remote` to `local` counts under: over loopback, the local user at its other end
    /// (`uid N`), whom no address tells apart from the others; else the range of ``key(of:)``, and `loopback` when
    /// the kernel does not say whose the connection is.
    public static func key(of remote: SocketAddress?, local: SocketAddress?) -> String {
        let range = key(of: remote)
        guard range == "loopback", let remote, let local, let uid = LoopbackPeer.uid(remote: remote, local: local) else { return range }
        return "uid \(uid)"
    }

    /// The key of `address`'s range; `local` for a client of a Unix socket.
    public static func key(of address: SocketAddress?) -> String {
        guard let address, let text = address.ipAddress else { return "local" }
        switch address.protocol {
        case .inet:
            return isLoopback(text) ? "loopback" : text
        case .inet6:
            var bytes = [UInt8](repeating: 0, count: 16)
            guard inet_pton(AF_INET6, text, &bytes) == 1 else { return text }
            if bytes[0..<15].allSatisfy({ $0 == 0 }) && bytes[15] == 1 { return "loopback" }
            // An IPv4 client of a dual-stack listener (::ffff:a.b.c.d) is counted as IPv4.
            if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF {
                return bytes[12] == 127 ? "loopback" : "\(bytes[12]).\(bytes[13]).\(bytes[14]).\(bytes[15])"
            }
            var key = ""
            for pair in stride(from: 0, to: 8, by: 2) {
                key += String(UInt16(bytes[pair]) << 8 | UInt16(bytes[pair + 1]), radix: 16) + ":"
            }
            return key + ":/64"
        default:
            return "local"
        }
    }

    /// Whether `address` (text, as `SocketAddress.ipAddress` writes it) is a loopback address.
    static func isLoopback(_ address: String) -> Bool {
        address.hasPrefix("127.") || address == "::1" || address.hasPrefix("::ffff:127.")
    }
}
