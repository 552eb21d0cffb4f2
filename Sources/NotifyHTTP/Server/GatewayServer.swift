import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
public import Logging
public import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
public import ServiceLifecycle
import Foundation
import Synchronization

/// The gateway's HTTP server: on an address of its own (`--listen`), or on the listening socket systemd handed over
/// (`notifyd-http.socket`, or `systemd-socket-activate`), which Hummingbird's `Application` cannot adopt. It accepts
/// each connection within the bounds, in total and per client address, and hands it to the same HTTP and WebSocket
/// channel, with the routes of ``HTTPGateway/router()`` and ``HTTPGateway/webSocketRouter()``.
public struct GatewayServer: Service {
    /// Where it listens.
    public enum Listener: Sendable {
        /// A socket of its own, bound to this address and port.
        case address(host: String, port: Int)
        /// The listening socket with this descriptor, which systemd passed.
        case inherited(CInt)
    }

    let listener: Listener
    let gateway: HTTPGateway
    let maxConnections: Int
    let maxConnectionsPerAddress: Int
    let timeouts: Timeouts
    let sendBuffer: Int
    let tls: GatewayTLS?
    let logger: Logger
    let onListening: @Sendable (SocketAddress?) throws -> Void

    /// How long a connection may take to send a request, and stay idle between requests.
    public struct Timeouts: Sendable {
        /// From a connection's opening to the end of its first request's head.
        public var header: Duration
        /// From the end of a response to the next request's head (and within a request, between its parts).
        public var idle: Duration

        /// Creates timeouts.
        public init(header: Duration = .seconds(10), idle: Duration = .seconds(60)) {
            self.header = header
            self.idle = idle
        }
    }

    /// A server on `listener`, with at most `maxConnections` open at once and `maxConnectionsPerAddress` from one
    /// client range (see ``ClientRange``; one more is closed as it comes), each closed past `timeouts`, each with a
    /// socket send buffer of `sendBuffer` bytes (the kernel doubles it), so that a reader that stops costs little;
    /// `onListening` is told its address once it accepts (and may refuse it by throwing).
    public init(
        listener: Listener,
        gateway: HTTPGateway,
        maxConnections: Int,
        maxConnectionsPerAddress: Int,
        timeouts: Timeouts = Timeouts(),
        sendBuffer: Int = 128 << 10,
        tls: GatewayTLS? = nil,
        logger: Logger,
        onListening: @escaping @Sendable (SocketAddress?) throws -> Void
    ) {
        self.listener = listener
        self.gateway = gateway
        self.maxConnections = maxConnections
        self.maxConnectionsPerAddress = maxConnectionsPerAddress
        self.timeouts = timeouts
        self.sendBuffer = sendBuffer
        self.tls = tls
        self.logger = logger
        self.onListening = onListening
    }

    /// The descriptor systemd passed, if it passed exactly one listening socket to this process
    /// (`LISTEN_PID`, `LISTEN_FDS`; sd_listen_fds(3)): always 3. The variables are removed, so that no child takes
    /// them for its own.
    public static func inheritedSocket() -> CInt? {
        let environment = ProcessInfo.processInfo.environment
        guard let pid = environment["LISTEN_PID"].flatMap({ Int32($0) }), pid == getpid(), environment["LISTEN_FDS"] == "1" else {
            return nil
        }
        unsetenv("LISTEN_PID")
        unsetenv("LISTEN_FDS")
        unsetenv("LISTEN_FDNAMES")
        return 3
    }

    public func run() async throws {
        let logger = self.logger
        let routes = gateway.router().buildResponder()
        // What Application does for each request: the context from the connection, the router's answer (its errors
        // made responses by the router), the response written.
        let responder: HTTPChannelHandler.Responder = { request, writer, channel in
            let context = GatewayContext(source: .init(channel: channel, logger: logger))
            let response: Response
            do {
                response = try await routes.respond(to: request, context: context)
            } catch {
                response = Response(status: .internalServerError)
            }
            try await writer.write(response: response.head, body: response.body)
        }
        let child = HTTP1WebSocketUpgradeChannel(
            responder: responder,
            webSocketResponder: gateway.webSocketRouter().buildResponder(),
            configuration: .init(http1: .init(idleTimeout: TimeAmount(timeouts.idle)))
        )
        let headerDeadline = TimeAmount(timeouts.header)
        let tlsContext = tls?.context
        let gateway = self.gateway
        let open = GatewayConnections()
        let maxConnections = self.maxConnections, maxConnectionsPerAddress = self.maxConnectionsPerAddress
        let setUp: @Sendable (any Channel) -> EventLoopFuture<GatewayConnection> = { channel in
            // Who the client is, asked of the kernel (a netlink query, or /proc's lists) on the thread pool, not on the
            // event loop: the channel is not read before this completes.
            NIOThreadPool.singleton.runIfActive(eventLoop: channel.eventLoop) {
                ClientRange.key(of: channel.remoteAddress, local: channel.localAddress)
            }.flatMapThrowing { client in
                try GatewayServer.setUp(channel, client: client, open: open, bounds: (maxConnections, maxConnectionsPerAddress), tls: tlsContext,
                    headerDeadline: headerDeadline, gateway: gateway)
            }.flatMap { router in
                guard let router else {
                    return channel.eventLoop.makeSucceededFuture(GatewayConnection(channel: channel, http: nil, servedByHummingbird: channel.eventLoop.makeSucceededFuture(false)))
                }
                let servedByHummingbird = router
                return child.setup(channel: channel, logger: logger).map {
                    GatewayConnection(channel: channel, http: $0, servedByHummingbird: servedByHummingbird)
                }
            }
        }
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelOption(ChannelOptions.allowRemoteHalfClosure, value: true)
            .childChannelOption(ChannelOptions.socketOption(.so_sndbuf), value: SocketOptionValue(sendBuffer))
            // The first read's buffer stays with its connection: 512 bytes hold most request heads, where NIO's 2 KB
            // would be kept by each of thousands of idle streams; it grows for a connection whose reads fill it.
            .childChannelOption(ChannelOptions.recvAllocator, value: AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 512, maximum: 65_536))
        let server: NIOAsyncChannel<GatewayConnection, Never>
        switch listener {
        case .address(let host, let port):
            server = try await bootstrap
                .serverChannelOption(ChannelOptions.backlog, value: 256)
                .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
                .bind(host: host, port: port, childChannelInitializer: setUp)
        case .inherited(let descriptor):
            server = try await bootstrap.bind(NIOBSDSocket.Handle(descriptor), childChannelInitializer: setUp)
        }
        try onListening(server.channel.localAddress)
        // Stopped, it takes no more connections and closes those it has; a stream ends on its own (see
        // ``HTTPGateway/pump(_:format:keepalive:write:)``).
        try await withGracefulShutdownHandler {
            try await server.executeThenClose { connections in
                try await withThrowingDiscardingTaskGroup { group in
                    for try await connection in connections {
                        guard let http = connection.http else { continue }
                        group.addTask {
                            // Until the first request line is read; a stream's connection needs no task after it.
                            guard (try? await connection.servedByHummingbird.get()) == true else { return }
                            await child.handle(value: http, logger: logger)
                        }
                    }
                }
            }
        } onGracefulShutdown: {
            server.channel.close(promise: nil)
            open.closeAll()
        }
    }
}

extension GatewayServer {
    /// Counts `channel`, from `client`, within `bounds` (closed as it comes past them: nil), then sets up what reads
    /// it first: TLS, the head's deadline, and the ``FirstRequestRouter``, whose decision it returns. Counted as it is
    /// accepted, before anything serves it (a stream is served from its first read), so that a burst of connections
    /// cannot pass the bounds.
    fileprivate static func setUp(
        _ channel: any Channel,
        client: String,
        open: GatewayConnections,
        bounds: (total: Int, perClient: Int),
        tls: NIOSSLContext?,
        headerDeadline: TimeAmount,
        gateway: HTTPGateway
    ) throws -> EventLoopFuture<Bool>? {
        guard let id = open.add(channel, from: client, total: bounds.total, perClient: bounds.perClient) else {
            channel.close(promise: nil)
            return nil
        }
        channel.closeFuture.whenComplete { _ in open.remove(id) }
        // TLS first: the deadline reads the request's bytes in clear, and times a handshake that never ends.
        if let tls { try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: tls)) }
        try channel.pipeline.syncOperations.addHandler(RequestHeadDeadline(deadline: headerDeadline))
        // A stream's connection is served on its event loop, any other by Hummingbird's channel, which is set up
        // either way (``HTTPGateway/serveStream(on:as:client:)`` then changes it).
        let router = FirstRequestRouter(eventLoop: channel.eventLoop) { format in
            try gateway.serveStream(on: channel, as: format, client: client)
        }
        try channel.pipeline.syncOperations.addHandler(router)
        return router.servedByHummingbird
    }
}

/// A connection accepted: Hummingbird's channel to serve, once its first request line is read, unless a
/// ``StreamResponder`` serves it on its event loop.
struct GatewayConnection: Sendable {
    let channel: any Channel
    /// Nil for a connection past the bounds, closed as it came.
    let http: HTTP1WebSocketUpgradeChannel.Value?
    let servedByHummingbird: EventLoopFuture<Bool>
}

/// The connections a ``GatewayServer`` has open, by client address: for its bounds, and to close at its end (an
/// idle keep-alive connection would otherwise wait for a request that never comes).
private final class GatewayConnections: Sendable {
    private struct State {
        var next = 0
        var open: [Int: (channel: any Channel, client: String)] = [:]
        var byClient: [String: Int] = [:]
        var closed = false
    }

    private let state = Mutex(State())

    /// Counts `channel`, from `client`, unless that would pass `total` or `perClient`: then nil.
    func add(_ channel: any Channel, from client: String, total: Int, perClient: Int) -> Int? {
        let (id, closed): (Int?, Bool) = state.withLock { state in
            guard state.open.count < total, state.byClient[client, default: 0] < perClient else { return (nil, state.closed) }
            state.next += 1
            state.open[state.next] = (channel, client)
            state.byClient[client, default: 0] += 1
            return (state.next, state.closed)
        }
        if closed, id != nil { channel.close(promise: nil) }
        return id
    }

    func remove(_ id: Int) {
        state.withLock { state in
            guard let gone = state.open.removeValue(forKey: id) else { return }
            let left = state.byClient[gone.client, default: 1] - 1
            state.byClient[gone.client] = left > 0 ? left : nil
        }
    }

    func closeAll() {
        let open = state.withLock { state in
            state.closed = true
            return state.open.values.map(\.channel)
        }
        for channel in open { channel.close(promise: nil) }
    }
}
