import Foundation
import NIOCore

/// Which `Host` and `Origin` headers the gateway answers: the address a client reached it on (and the names given
/// with `--allow-host`), and pages of that address (and of the origins given with `--allow-origin`).
///
/// A browser on this host reaches the gateway for any page it opens: a page of another site may send it requests
/// (`fetch` with `no-cors`, a form, a WebSocket, none of which asks first), and a name that the page's site points
/// at 127.0.0.1 (DNS rebinding) makes the browser treat the gateway as that site. The browser says where a request
/// comes from in `Origin` and which name it used in `Host`; this policy refuses both when they are not the
/// gateway's own. Clients that are not browsers (curl, ntfy's apps) send no `Origin` and the `Host` they dialled.
public struct SameOriginPolicy: Sendable {
    /// Names the gateway also answers to (a reverse proxy's, a DNS name of the host), lowercased, any port.
    public var hostNames: Set<String>
    /// Origins whose pages may use the gateway (`https://dashboard.example`), lowercased.
    public var origins: Set<String>
    /// Whether the gateway serves HTTPS: its own pages' origin is then `https://`, and a `Host` without a port 443.
    public var isSecure: Bool

    /// A policy that takes the listener's own address and these names and origins.
    public init(hostNames: [String] = [], origins: [String] = [], isSecure: Bool = false) {
        self.hostNames = Set(hostNames.map { $0.lowercased() })
        self.origins = Set(origins.map { $0.lowercased() })
        self.isSecure = isSecure
    }

    /// Why a request with `host` and `origin`, which reached the gateway on `local`, is refused; nil when it is
    /// not. A request without `Host` (HTTP/1.0) is taken: a browser always sends one.
    func refusal(host: String?, origin: String?, local: SocketAddress?) -> String? {
        if let host, !isOwn(authority: host[...], defaultPort: isSecure ? 443 : 80, local: local) {
            return "Host: \(host.prefix(100)) is not a name of this gateway (\(SameOriginPolicy.describe(local))); "
                + "refused, so that a web page cannot reach the gateway through a name that points here "
                + "(DNS rebinding); if it is one, start notifyd-http with --allow-host \(SameOriginPolicy.hostPart(host[...]) ?? "NAME")"
        }
        guard let origin else { return nil }
        if origins.contains(origin.lowercased()) { return nil }
        if origin != "null" {
            // Only a web page's origin is judged: a browser sends `null` or an http(s) origin, and nothing else can
            // make it send another; a client that is not a browser may send what it likes (`ws://host`, say).
            guard let separator = origin.range(of: "://") else { return nil }
            let scheme = origin[..<separator.lowerBound].lowercased()
            guard scheme == "http" || scheme == "https" else { return nil }
            // The gateway's own pages are on its address, with its scheme, or any page of a name it answers to.
            if let (_, authority) = SameOriginPolicy.split(origin: origin[...]), let (host, _) = SameOriginPolicy.split(authority: authority) {
                if hostNames.contains(host.lowercased()) { return nil }
                if scheme == (isSecure ? "https" : "http"), isOwn(authority: authority, defaultPort: isSecure ? 443 : 80, local: local) { return nil }
            }
        }
        return "a page of \(origin.prefix(100)) may not use this gateway from a browser (Origin is another site's); "
            + "if it should, start notifyd-http with --allow-origin \(origin.prefix(100))"
    }

    /// Whether `authority` (`host[:port]`) names the gateway: its listening address and port (`localhost` too on
    /// loopback), or a name of ``hostNames`` with any port.
    private func isOwn(authority: Substring, defaultPort: Int, local: SocketAddress?) -> Bool {
        guard let (host, port) = SameOriginPolicy.split(authority: authority) else { return false }
        let name = host.lowercased()
        if hostNames.contains(name) { return true }
        guard let local, let address = local.ipAddress?.lowercased(), let localPort = local.port else { return false }
        guard (port ?? defaultPort) == localPort else { return false }
        let plain = address.hasPrefix("::ffff:") && address.contains(".") ? String(address.dropFirst(7)) : address
        if name == address || name == plain { return true }
        return name == "localhost" && ClientRange.isLoopback(plain)
    }

    /// `host[:port]`, the host possibly an IPv6 address in brackets; nil when it is not that shape.
    static func split(authority: Substring) -> (host: Substring, port: Int?)? {
        var host: Substring
        var rest: Substring
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return nil }
            host = authority[authority.index(after: authority.startIndex)..<close]
            rest = authority[authority.index(after: close)...]
        } else if let colon = authority.firstIndex(of: ":") {
            host = authority[..<colon]
            rest = authority[colon...]
        } else {
            host = authority
            rest = ""
        }
        guard !host.isEmpty else { return nil }
        if rest.isEmpty { return (host, nil) }
        guard rest.first == ":", let port = Int(rest.dropFirst()), (0...65_535).contains(port) else { return nil }
        return (host, port)
    }

    /// Whether `text` is an origin as a browser sends it: `http` or `https`, `://`, a host, perhaps a port.
    public static func isOrigin(_ text: String) -> Bool {
        split(origin: text[...]).map { split(authority: $0.authority) != nil } ?? false
    }

    /// `scheme://authority` of an `Origin` header; nil for `null` or anything else.
    static func split(origin: Substring) -> (scheme: Substring, authority: Substring)? {
        guard let separator = origin.range(of: "://") else { return nil }
        let scheme = origin[..<separator.lowerBound].lowercased()
        guard scheme == "http" || scheme == "https" else { return nil }
        let authority = origin[separator.upperBound...]
        guard !authority.isEmpty, !authority.contains("/") else { return nil }
        return (scheme[...], authority)
    }

    private static func hostPart(_ authority: Substring) -> String? {
        split(authority: authority).map { String($0.host.prefix(100)) }
    }

    private static func describe(_ local: SocketAddress?) -> String {
        guard let local, let address = local.ipAddress, let port = local.port else { return "its socket" }
        return address.contains(":") ? "[\(address)]:\(port)" : "\(address):\(port)"
    }
}
