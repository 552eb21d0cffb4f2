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
        abstract: "Serve notifyd's topics over HTTP: publish, latest, JSON, SSE, raw and WebSocket streams (ntfy's API), /metrics.",
        discussion: """
            A client of the daemon, as `notify` is: it reaches the daemon by the same rule (--socket, else \
            $NOTIFYD_SOCKET, else the per-user or system socket), and the daemon's access rules and limits apply to \
            the user it runs as, which must not be root. It listens on 127.0.0.1:8080 unless --listen says otherwise. \
            Every request carries a token (Authorization: Bearer TOKEN, or ntfy's ?auth=): one of --token-file's, or, \
            without it, the gateway's own, made at its first start in $STATE_DIRECTORY/token (systemd's), else \
            $XDG_STATE_HOME/notifyd-http/token, else ~/.local/state/notifyd-http/token; --allow-anonymous takes \
            requests without one (loopback is every local user, and every web page a browser on the host opens). \
            Beyond loopback it asks for --token-file or --allow-anonymous. It answers only requests whose Host is \
            its address (or --allow-host) and whose Origin, if any, is its own (or --allow-origin). Started by \
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

    @Flag(name: .long, help: "Take requests without a token, although anyone who reaches the address (on loopback: every local user and web page) may publish and read as this gateway's user.")
    var allowAnonymous = false

    @Option(name: .long, help: ArgumentHelp("A name the gateway also answers to in Host (a DNS name of the host, a proxy's); repeatable.", valueName: "name"))
    var allowHost: [String] = []

    @Option(name: .long, help: ArgumentHelp("An origin whose web pages may publish and open WebSockets (https://dashboard.example); repeatable.", valueName: "origin"))
    var allowOrigin: [String] = []

    @Option(name: .long, help: ArgumentHelp("Seconds a connection has to send its first request's head.", valueName: "seconds"))
    var headerTimeout = 10

    @Option(name: .long, help: ArgumentHelp("Seconds a connection may stay idle between requests.", valueName: "seconds"))
    var idleTimeout = 60

    @Option(name: .long, help: ArgumentHelp("Bytes of events a stream holds for its reader; past it, the stream drops the oldest and says how many (the streams share their connections to the daemon: one never holds up another).", valueName: "bytes"))
    var streamBuffer = GatewayConfiguration.defaultStreamBuffer

    @Option(name: .long, help: ArgumentHelp("Connections to the daemon that the streams share, each stream on the least loaded one.", valueName: "count"))
    var streamConnections = 4

    @Option(name: .long, help: ArgumentHelp("Not used any more (a stream's queue drops past --stream-buffer whether its reader moves or not); still accepted, so that existing units start.", valueName: "seconds"))
    var streamStall = 2

    @Option(name: .long, help: ArgumentHelp("The most HTTP connections open at once; one more is closed as it comes.", valueName: "count"))
    var maxConnections = 1_024

    @Option(name: .long, help: ArgumentHelp("The most HTTP connections open at once from one client: a local user over loopback, else an address (IPv6 by /64).", valueName: "count"))
    var maxConnectionsPerAddress = 64

    @Option(name: .long, help: ArgumentHelp("The most streams open at once (they share --stream-connections connections to the daemon).", valueName: "count"))
    var maxStreams = 256

    @Option(name: .long, help: ArgumentHelp("The most streams open at once from one client: a local user over loopback, else an address (IPv6 by /64).", valueName: "count"))
    var maxStreamsPerAddress = 16

    @Option(name: .long, help: ArgumentHelp("The most topics one client address may hold retained through the gateway (its share of the daemon's limit for the gateway's user).", valueName: "count"))
    var maxRetainedTopicsPerAddress = 25_000

    @Option(name: .long, help: ArgumentHelp("The most bytes of retained messages one client address may hold through the gateway.", valueName: "bytes"))
    var maxRetainedBytesPerAddress = 16 << 20

    @Option(name: .long, help: ArgumentHelp("Serve HTTPS with this PEM certificate chain (with --tls-key); nothing is served in clear then.", valueName: "path"))
    var tlsCertificate: String?

    @Option(name: .long, help: ArgumentHelp("The PEM private key of --tls-certificate, readable by its owner (and group) only.", valueName: "path"))
    var tlsKey: String?

    func validate() throws {
        for (name, value) in [("--keepalive", keepalive), ("--header-timeout", headerTimeout), ("--idle-timeout", idleTimeout), ("--stream-stall", streamStall)] {
            guard (1...3_600).contains(value) else { throw ValidationError("\(name) takes 1 to 3600 seconds") }
        }
        guard (0...(1 << 40)).contains(maxRetainedBytesPerAddress) else { throw ValidationError("--max-retained-bytes-per-address takes 0 to 1099511627776") }
        guard (4_096...(64 << 20)).contains(streamBuffer) else { throw ValidationError("--stream-buffer takes 4096 to 67108864 bytes") }
        guard (1...64).contains(streamConnections) else { throw ValidationError("--stream-connections takes 1 to 64") }
        guard (tlsCertificate == nil) == (tlsKey == nil) else { throw ValidationError("--tls-certificate and --tls-key go together") }
        for origin in allowOrigin where !SameOriginPolicy.isOrigin(origin) {
            throw ValidationError("--allow-origin \(origin) is not an origin: scheme://host[:port], as a browser sends it (https://dashboard.example)")
        }
        for (name, value) in [
            ("--max-connections", maxConnections), ("--max-connections-per-address", maxConnectionsPerAddress),
            ("--max-streams", maxStreams), ("--max-streams-per-address", maxStreamsPerAddress),
            ("--max-retained-topics-per-address", maxRetainedTopicsPerAddress),
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

    /// Where the gateway keeps its own token when no --token-file is given.
    static func ownTokenPath(environment: [String: String]) -> String? {
        if let state = environment["STATE_DIRECTORY"]?.split(separator: ":").first, state.hasPrefix("/") { return state + "/token" }
        if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") { return state + "/notifyd-http/token" }
        if let home = environment["HOME"], home.hasPrefix("/") { return home + "/.local/state/notifyd-http/token" }
        return nil
    }

    /// The tokens requests must carry: --token-file's, none with --allow-anonymous, else the gateway's own.
    func tokenTable() throws -> TokenTable? {
        do {
            if let tokenFile { return try TokenTable(contentsOf: tokenFile) }
            if allowAnonymous { return nil }
            guard let path = Self.ownTokenPath(environment: ProcessInfo.processInfo.environment) else {
                throw ValidationError("no place for the gateway's own token (no $STATE_DIRECTORY, $XDG_STATE_HOME or $HOME); give --token-file, or --allow-anonymous")
            }
            let (table, made) = try TokenTable.loadOrMake(at: path)
            let how = made ? "made a token for requests in" : "requests take the token in"
            FileHandle.standardOutput.write(Data("notifyd-http: \(how) \(path) (Authorization: Bearer TOKEN)\n".utf8))
            return table
        } catch let problem as TokenTable.Problem {
            throw ValidationError(problem.description)
        }
    }

    func run() async throws {
        // The daemon's rules and quotas for root are everyone's: a gateway must not lend root to whoever reaches it.
        guard geteuid() != 0 else {
            FileHandle.standardError.write(Data(
                "notifyd-http: does not run as root: whoever reaches it acts as the user it runs as; run it as a user of its own (the package's notifyd-http.service does: User=notifyd-http)\n".utf8
            ))
            throw ExitCode(77)
        }
        let (host, port) = try Self.address(listen)
        let socketPath = SocketPath.resolveForClient(explicit: socket)
        let tokens = try tokenTable()
        let tls: GatewayTLS?
        do {
            tls = try tlsCertificate.map { try GatewayTLS(certificate: $0, key: tlsKey ?? "") }
        } catch let problem as TokenTable.Problem {
            throw ValidationError(problem.description)
        }
        let gateway = HTTPGateway(
            configuration: GatewayConfiguration(
                socketPath: socketPath,
                keepalive: .seconds(keepalive),
                tokens: tokens,
                sameOrigin: SameOriginPolicy(hostNames: allowHost, origins: allowOrigin, isSecure: tls != nil),
                maxStreams: maxStreams,
                maxStreamsPerAddress: maxStreamsPerAddress,
                streamBuffer: streamBuffer,
                streamConnections: streamConnections,
                maxRetainedTopicsPerAddress: maxRetainedTopicsPerAddress,
                maxRetainedBytesPerAddress: maxRetainedBytesPerAddress
            )
        )
        var logger = Logger(label: "notifyd-http")
        logger.logLevel = .warning
        // Socket activation: the socket unit's address (--listen does not apply), refused beyond loopback as
        // --listen would be.
        let inherited = GatewayServer.inheritedSocket()
        let hasTokens = tokenFile != nil, anonymous = allowAnonymous, listen = self.listen, scheme = tls == nil ? "http" : "https"
        let server = GatewayServer(
            listener: inherited.map { .inherited($0) } ?? .address(host: host, port: port),
            gateway: gateway,
            maxConnections: maxConnections,
            maxConnectionsPerAddress: maxConnectionsPerAddress,
            timeouts: .init(header: .seconds(headerTimeout), idle: .seconds(idleTimeout)),
            sendBuffer: streamBuffer / 8,
            tls: tls,
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
            FileHandle.standardOutput.write(Data("notifyd-http: listening on \(scheme)://\(location)\(origin), daemon socket \(socketPath)\n".utf8))
        }
        let services = ServiceGroup(configuration: .init(services: [server], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await services.run()
        await gateway.close()
    }
}
