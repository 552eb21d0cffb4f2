import Foundation
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#endif

/// A real `nats-server` (installed by `script/bootstrap --for-tests`), JetStream on, on loopback, with its store in a
/// temporary directory: alone on a port it picks, or on a port given (to start it again where clients look for it),
/// or as a member of a cluster. Stopped by ``stop()`` or ``kill()``, or when let go of.
public final class NATSServerProcess: Sendable {
    /// The port clients connect to.
    public let port: Int
    /// Where JetStream keeps its files; the same store can be given to a restarted server.
    public let store: String
    private let process: Process
    private let ownsStore: Bool
    /// What the server printed (its log), the latest ``linesKept`` lines at most.
    private let said: NIOLockedValueBox<[String]>

    public struct Failure: Error, CustomStringConvertible {
        public let description: String

        public init(description: String) {
            self.description = description
        }
    }

    /// How a server joins a cluster: its name, its route port, and the route ports of all members.
    public struct ClusterMembership: Sendable {
        public var clusterName: String
        public var serverName: String
        public var routePort: Int
        public var routePorts: [Int]

        public init(clusterName: String, serverName: String, routePort: Int, routePorts: [Int]) {
            self.clusterName = clusterName
            self.serverName = serverName
            self.routePort = routePort
            self.routePorts = routePorts
        }
    }

    /// The address it listens on (loopback unless given).
    public let address: String
    /// How it joined a cluster, if it did: what a restart of it gives again.
    public let cluster: ClusterMembership?

    /// `nats://<address>:<port>`.
    /// Whether a line the server has printed so far contains `text` (a slow consumer cut, say).
    public func hasSaid(_ text: String) -> Bool {
        said.withLockedValue { $0.contains { $0.contains(text) } }
    }

    /// The last `count` lines the server printed, one per line: what a failed test shows to say why.
    public func lastLines(_ count: Int = 20) -> String {
        said.withLockedValue { $0.suffix(count).joined(separator: "\n") }
    }

    static let linesKept = 10_000

    public var url: String { "nats://\(address):\(port)" }

    /// Starts the server and waits (at most `timeout`) until it says where it listens (and, in a cluster, until
    /// JetStream is ready, which needs a leader). `configuration` is nats-server configuration text (its `tls { … }`
    /// and `authorization { … }` blocks, say), given to it as a file beside the store.
    public static func start(
        port: Int? = nil,
        store: String? = nil,
        cluster: ClusterMembership? = nil,
        configuration: String? = nil,
        address: String = "127.0.0.1",
        timeout: Duration = .seconds(30)
    ) async throws -> NATSServerProcess {
        let candidates = ["/usr/sbin/nats-server", "/usr/bin/nats-server", "/usr/local/bin/nats-server"]
        guard let binary = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw Failure(description: "nats-server is not installed: run script/bootstrap --for-tests")
        }
        let directory = store ?? FileManager.default.temporaryDirectory.appendingPathComponent("nats-\(UUID().uuidString)").path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        var arguments = ["-a", address, "-p", port.map(String.init) ?? "-1", "-js", "-sd", directory]
        if let configuration {
            let file = directory + ".conf"
            try configuration.write(toFile: file, atomically: true, encoding: .utf8)
            arguments += ["-c", file]
        }
        if let cluster {
            arguments += [
                "-n", cluster.serverName, "--cluster_name", cluster.clusterName,
                "--cluster", "nats://\(address):\(cluster.routePort)",
                "--routes", cluster.routePorts.filter { $0 != cluster.routePort }.map { "nats://\(address):\($0)" }.joined(separator: ","),
            ]
        }
        process.arguments = arguments
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        let (lines, sink) = AsyncStream.makeStream(of: String.self)
        let pending = NIOLockedValueBox("")
        let said = NIOLockedValueBox<[String]>([])
        errors.fileHandleForReading.readabilityHandler = { handle in
            let data = handle.availableData
            if data.isEmpty {
                sink.finish()
                handle.readabilityHandler = nil
                return
            }
            pending.withLockedValue { text in
                text += String(decoding: data, as: UTF8.self)
                while let newline = text.firstIndex(of: "\n") {
                    let line = String(text[..<newline])
                    said.withLockedValue { said in
                        if said.count >= Self.linesKept { said.removeFirst(said.count / 2) }
                        said.append(line)
                    }
                    sink.yield(line)
                    text = String(text[text.index(after: newline)...])
                }
            }
        }
        try process.run()
        let marker = "Listening for client connections on \(address):"
        let port = try await withThrowingTaskGroup(of: Int?.self) { group in
            group.addTask {
                for await line in lines {
                    if let range = line.range(of: marker), let port = Int(line[range.upperBound...].prefix { $0.isNumber }) {
                        return port
                    }
                }
                return nil
            }
            group.addTask {
                try await Task.sleep(for: timeout)  // a deadline, not a synchronisation: the line above is the event
                return nil
            }
            let port = try await group.next()!
            group.cancelAll()
            return port
        }
        guard let port else {
            process.terminate()
            throw Failure(description: "nats-server did not say where it listens within \(timeout)")
        }
        return NATSServerProcess(port: port, address: address, cluster: cluster, process: process, store: directory, ownsStore: store == nil, said: said)
    }

    /// Starts `count` servers routed to each other as one cluster, each with JetStream and its own store.
    public static func startCluster(count: Int, name: String = "notifyd-test", address: String = "127.0.0.1") async throws -> [NATSServerProcess] {
        let routePorts = try (0..<count).map { _ in try freePort() }
        var servers: [NATSServerProcess] = []
        for (index, routePort) in routePorts.enumerated() {
            let membership = ClusterMembership(clusterName: name, serverName: "\(name)-\(index)", routePort: routePort, routePorts: routePorts)
            servers.append(try await start(cluster: membership, address: address))
        }
        return servers
    }

    /// A loopback TCP port nobody listens on now.
    public static func freePort() throws -> Int {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw Failure(description: "socket: errno \(errno)") }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) == 0 && getsockname(descriptor, $0, &length) == 0 }
        }
        guard bound else { throw Failure(description: "bind: errno \(errno)") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    private init(port: Int, address: String, cluster: ClusterMembership?, process: Process, store: String, ownsStore: Bool, said: NIOLockedValueBox<[String]>) {
        self.said = said
        self.port = port
        self.address = address
        self.cluster = cluster
        self.process = process
        self.store = store
        self.ownsStore = ownsStore
    }

    /// Stops the server (SIGTERM) and waits until it is gone; a store the server made itself is removed.
    public func stop() {
        end(SIGTERM, keepStore: false)
    }

    /// Kills the server (SIGKILL), as a crash or a pulled cable would, keeping its store for a restart.
    public func kill() {
        end(SIGKILL, keepStore: true)
    }

    private func end(_ signal: Int32, keepStore: Bool) {
        if process.isRunning {
            let pid = process.processIdentifier
            Glibc.kill(pid, signal)
            // Not `waitUntilExit()`: on Linux it spins the run loop until Foundation hears of the exit, and when it
            // does not (a clean-clone CI run of 2026-12-07: a server gone, `isRunning` still true) it spun a
            // concurrency-pool thread at 100% for good, starving every other test. Gone or a zombie counts as ended;
            // a server that ignores SIGTERM for 10 s is killed.
            if !NATSServerProcess.waitForExit(of: pid, within: .seconds(10)) {
                Glibc.kill(pid, SIGKILL)
                _ = NATSServerProcess.waitForExit(of: pid, within: .seconds(5))
            }
        }
        if ownsStore && !keepStore { try? FileManager.default.removeItem(atPath: store) }
    }

    /// Whether process `pid` ended (no longer exists, or is a zombie left for Foundation to reap) within `limit`,
    /// looked at every 10 ms without reaping it.
    private static func waitForExit(of pid: Int32, within limit: Duration) -> Bool {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if Glibc.kill(pid, 0) != 0 { return true }
            if let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")"),
                stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).hasPrefix("Z")
            {
                return true
            }
            usleep(10_000)
        }
        return false
    }

    deinit {
        stop()
        if ownsStore { try? FileManager.default.removeItem(atPath: store) }
    }
}
