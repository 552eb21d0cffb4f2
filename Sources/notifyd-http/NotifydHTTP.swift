import ArgumentParser
import Foundation
import Logging
import NIOCore
import NotifyBus
import NotifyHTTP
import ServiceLifecycle
import UnixSignals

/// `notifyd-http`: the host's notifications over HTTP, ntfy's API and notifyd's own, as a client of the daemon.
@main
struct NotifydHTTP: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "notifyd-http",
        abstract: "Serve notifyd's topics over HTTP: publish, latest, and JSON, SSE and raw streams (ntfy's API).",
        discussion: """
            A client of the daemon, as `notify` is: it reaches the daemon by the same rule (--socket, else \
            $NOTIFYD_SOCKET, else the per-user or system socket), and the daemon's access rules and limits apply to \
            the user it runs as. It listens on 127.0.0.1:8080 unless --listen says otherwise. With --token-file, every \
            request carries a token of the file (Authorization: Bearer TOKEN); without one, it refuses to listen \
            beyond loopback unless --allow-anonymous says that anyone who reaches it may publish and read. Started by \
            systemd with a listening socket (notifyd-http.socket, or systemd-socket-activate), it serves on that \
            socket instead of --listen's.
            """,
        version: NotifydRelease.version
    )

    @Option(name: .long, help: ArgumentHelp("The address and port to listen on (port 0: any free port).", valueName: "address:port"))
    var listen = "127.0.0.1:8080"

    @Option(name: .long, help: ArgumentHelp("The daemon's socket (default: $NOTIFYD_SOCKET, else the per-user or system socket).", valueName: "path"))
    var socket: String?

    @Option(name: .long, help: ArgumentHelp("Seconds between keepalive events on a stream (ntfy's 45).", valueName: "seconds"))
    var keepalive = 45

    @Option(
        name: .long,
        help: ArgumentHelp("Take only requests with a token of this file: lines `read-only TOKEN` or `read-write TOKEN`.", valueName: "path")
    )
    var tokenFile: String?

    @Flag(name: .long, help: "Listen beyond loopback without --token-file, although anyone who reaches the address may publish and read.")
    var allowAnonymous = false

    @Option(name: .long, help: ArgumentHelp("The most HTTP connections open at once; one more is closed as it comes.", valueName: "count"))
    var maxConnections = 1_024

    @Option(name: .long, help: ArgumentHelp("The most HTTP connections open at once from one client address.", valueName: "count"))
    var maxConnectionsPerAddress = 64

    @Option(name: .long, help: ArgumentHelp("The most streams open at once (each holds a connection to the daemon).", valueName: "count"))
    var maxStreams = 256

    @Option(name: .long, help: ArgumentHelp("The most streams open at once from one client address.", valueName: "count"))
    var maxStreamsPerAddress = 16

    func validate() throws {
        guard (1...3_600).contains(keepalive) else { throw ValidationError("--keepalive takes 1 to 3600 seconds") }
        for (name, value) in [
            ("--max-connections", maxConnections), ("--max-connections-per-address", maxConnectionsPerAddress),
            ("--max-streams", maxStreams), ("--max-streams-per-address", maxStreamsPerAddress),
        ] {
            guard (1...1_000_000).contains(value) else { throw ValidationError("\(name) takes 1 to 1000000") }
        }
        let (host, _) = try Self.address(listen)
        if !Self.isLoopback(host) && tokenFile == nil && !allowAnonymous {
            throw ValidationError(
                "--listen \(listen) is beyond loopback, where anyone who reaches it could publish and read as this gateway's user; give --token-file, or add --allow-anonymous to mean it"
            )
        }
    }

    /// `address:port`, the address possibly in brackets (IPv6).
    static func address(_ text: String) throws -> (host: String, port: Int) {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]), (0...65_535).contains(port) else {
            throw ValidationError("--listen \(text) is not address:port (127.0.0.1:8080, [::1]:8080, 0.0.0.0:80)")
        }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { throw ValidationError("--listen \(text) names no address") }
        return (host, port)
    }

    static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }

    func run() async throws {
        let (host, port) = try Self.address(listen)
        let socketPath = SocketPath.resolveForClient(explicit: socket)
        let tokens: TokenTable?
        do {
            tokens = try tokenFile.map { try TokenTable(contentsOf: $0) }
        } catch {
            throw ValidationError("\(error)")
        }
        let gateway = HTTPGateway(
            configuration: GatewayConfiguration(
                socketPath: socketPath,
                keepalive: .seconds(keepalive),
                tokens: tokens,
                maxStreams: maxStreams,
                maxStreamsPerAddress: maxStreamsPerAddress
            )
        )
        var logger = Logger(label: "notifyd-http")
        logger.logLevel = .warning
        // Socket activation: the socket unit's address (--listen does not apply), refused beyond loopback as
        // --listen would be.
        let inherited = GatewayServer.inheritedSocket()
        let hasTokens = tokenFile != nil, anonymous = allowAnonymous, listen = self.listen
        let server = GatewayServer(
            listener: inherited.map { .inherited($0) } ?? .address(host: host, port: port),
            gateway: gateway,
            maxConnections: maxConnections,
            maxConnectionsPerAddress: maxConnectionsPerAddress,
            logger: logger
        ) { address in
            let bound = address?.ipAddress ?? host
            if inherited != nil, !Self.isLoopback(bound), !hasTokens, !anonymous {
                throw ValidationError(
                    "the socket systemd passed listens on \(bound), beyond loopback, where anyone who reaches it could publish and read as this gateway's user; give --token-file, or add --allow-anonymous to mean it"
                )
            }
            // Where it listens (with port 0, the port it was given): scripts and tests read this line.
            let location = address.map { "\(bound):\($0.port ?? port)" } ?? listen
            let origin = inherited != nil ? " (a socket from systemd)" : ""
            FileHandle.standardOutput.write(Data("notifyd-http: listening on http://\(location)\(origin), daemon socket \(socketPath)\n".utf8))
        }
        let services = ServiceGroup(configuration: .init(services: [server], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await services.run()
        await gateway.close()
    }
}
