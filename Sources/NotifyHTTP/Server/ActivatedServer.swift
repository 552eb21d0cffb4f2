import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
public import Logging
public import NIOCore
import NIOPosix
public import ServiceLifecycle
import Foundation
import Synchronization

/// The gateway on a listening socket systemd handed over (`notifyd-http.socket`, or `systemd-socket-activate`):
/// Hummingbird's server binds a socket of its own, so this accepts on the inherited one and hands each connection to
/// the same HTTP and WebSocket channel, and the same routes, as ``HTTPGateway/router()`` and
/// ``HTTPGateway/webSocketRouter()`` give an `Application`.
public struct ActivatedServer: Service {
    let descriptor: CInt
    let gateway: HTTPGateway
    let maxConnections: Int
    let logger: Logger
    let onListening: @Sendable (SocketAddress?) throws -> Void

    /// A server on the listening socket `descriptor`, with at most `maxConnections` open at once (one more is closed
    /// as it comes); `onListening` is told its address once it accepts (and may refuse it by throwing).
    public init(
        descriptor: CInt,
        gateway: HTTPGateway,
        maxConnections: Int,
        logger: Logger,
        onListening: @escaping @Sendable (SocketAddress?) throws -> Void
    ) {
        self.descriptor = descriptor
        self.gateway = gateway
        self.maxConnections = maxConnections
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
            configuration: .init()
        )
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelOption(ChannelOptions.allowRemoteHalfClosure, value: true)
            .bind(NIOBSDSocket.Handle(descriptor)) { channel in child.setup(channel: channel, logger: logger) }
        try onListening(server.channel.localAddress)
        let open = OpenConnections()
        // Stopped, it takes no more connections and closes those it has; a stream ends on its own (see
        // ``HTTPGateway/pump(_:format:keepalive:write:)``).
        try await withGracefulShutdownHandler {
            try await server.executeThenClose { connections in
                try await withThrowingDiscardingTaskGroup { group in
                    for try await connection in connections {
                        guard open.count < maxConnections else {
                            connection.channel.close(promise: nil)
                            continue
                        }
                        // Counted as it is accepted, so that a burst of connections cannot pass the bound.
                        let id = open.add(connection.channel)
                        group.addTask {
                            defer { open.remove(id) }
                            await child.handle(value: connection, logger: logger)
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

/// The connections an ``ActivatedServer`` has open, to close at its end (an idle keep-alive connection would
/// otherwise wait for a request that never comes).
private final class OpenConnections: Sendable {
    private let channels = Mutex<(next: Int, open: [Int: any Channel], closed: Bool)>((0, [:], false))

    func add(_ channel: any Channel) -> Int {
        let (id, closed) = channels.withLock { state in
            state.next += 1
            state.open[state.next] = channel
            return (state.next, state.closed)
        }
        if closed { channel.close(promise: nil) }
        return id
    }

    var count: Int { channels.withLock { $0.open.count } }

    func remove(_ id: Int) {
        _ = channels.withLock { $0.open.removeValue(forKey: id) }
    }

    func closeAll() {
        let open = channels.withLock { state in
            state.closed = true
            return Array(state.open.values)
        }
        for channel in open { channel.close(promise: nil) }
    }
}
