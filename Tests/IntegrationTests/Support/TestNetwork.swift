import Foundation

/// Hosts of a test's own, on one machine: each a network namespace joined by a veth pair to a bridge in the test's
/// namespace, on a private /24 (`ip`, from iproute2; root only). The bridge's address is where the test's servers
/// listen. A host's link can be cut (`ip link set … down`) and restored, as a pulled cable or a partition would.
/// Everything is removed when the network is let go of.
final class TestNetwork {
    /// Where servers in the test's namespace listen, reachable from every host: the bridge's address.
    let gateway: String
    private let id: String
    private let prefix: String
    private var hosts: [String: (namespace: String, link: String)] = [:]

    /// Whether this process may make namespaces (it runs as root and has `ip`).
    static var isAvailable: Bool { getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/sbin/ip") }

    init() throws {
        id = String(UInt16.random(in: 0x1000...0xFFFF), radix: 16)
        prefix = "10.\(Int.random(in: 100...250)).\(Int.random(in: 1...250))"
        gateway = prefix + ".1"
        try Self.ip("link", "add", "nb\(id)", "type", "bridge")
        try Self.ip("addr", "add", gateway + "/24", "dev", "nb\(id)")
        try Self.ip("link", "set", "nb\(id)", "up")
    }

    /// Adds host `name` and returns its namespace, for `ip netns exec`.
    @discardableResult
    func addHost(_ name: String) throws -> String {
        let index = hosts.count + 1
        let namespace = "nd\(id)\(name)"
        let outside = "nv\(id)\(index)"
        let inside = "np\(id)\(index)"
        try Self.ip("netns", "add", namespace)
        hosts[name] = (namespace, outside)
        try Self.ip("link", "add", outside, "type", "veth", "peer", "name", inside)
        try Self.ip("link", "set", inside, "netns", namespace)
        try Self.ip("netns", "exec", namespace, "ip", "addr", "add", "\(prefix).\(10 + index)/24", "dev", inside)
        try Self.ip("netns", "exec", namespace, "ip", "link", "set", inside, "up")
        try Self.ip("netns", "exec", namespace, "ip", "link", "set", "lo", "up")
        try Self.ip("link", "set", outside, "master", "nb\(id)")
        try Self.ip("link", "set", outside, "up")
        return namespace
    }

    /// Cuts host `name`'s link: nothing goes in or out, and its connections hang as over a pulled cable.
    func cut(_ name: String) throws {
        try Self.ip("link", "set", hosts[name]!.link, "down")
    }

    /// Restores host `name`'s link.
    func restore(_ name: String) throws {
        try Self.ip("link", "set", hosts[name]!.link, "up")
    }

    private static func ip(_ arguments: String...) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/sbin/ip")
        process.arguments = arguments
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let said = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw TestFailure("ip \(arguments.joined(separator: " ")): \(String(decoding: said, as: UTF8.self))")
        }
    }

    deinit {
        for (namespace, link) in hosts.values {
            try? Self.ip("link", "del", link)
            try? Self.ip("netns", "del", namespace)
        }
        try? Self.ip("link", "del", "nb\(id)")
    }
}
