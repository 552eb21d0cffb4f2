import Logging
import NIOCore
import NIOPosix
import NotifyBus
import ServiceLifecycle

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Serves the protocol on a Unix socket until graceful shutdown: the daemon's one long-running service.
///
/// One event loop runs the listener, every connection and the broker, so broker state is never shared between
/// threads. On shutdown it stops accepting, sends every connection what it is owed, and waits for them to close
/// (each gets `ChannelTransport.closeGrace` at most) before removing the socket file.
struct NotifyServer: Service {
    let socketPath: String
    let configuration: BrokerConfiguration
    let eventLoop: any EventLoop
    let logger: Logger

    func run() async throws {
        let socketFile = try SocketFile(claiming: socketPath, logger: logger)
        defer { socketFile.remove() }
        let logger = self.logger
        let limits = configuration.protocolLimits
        let configuration = self.configuration
        let state = try await eventLoop.submit {
            NIOLoopBound(ServerState(broker: Broker(configuration: configuration)), eventLoop: eventLoop)
        }.get()

        let listener = try await ServerBootstrap(group: eventLoop)
            .serverChannelOption(.backlog, value: 256)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    state.value.connections[ObjectIdentifier(channel)] = channel
                    channel.closeFuture.assumeIsolated().whenComplete { _ in
                        state.value.connections[ObjectIdentifier(channel)] = nil
                    }
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(RequestDecoder(limits: limits)))
                    try channel.pipeline.syncOperations.addHandler(BrokerConnectionHandler(broker: state.value.broker, logger: logger))
                }
            }
            .bind(unixDomainSocketPath: socketPath)
            .get()
        socketFile.setMode(systemWide: getuid() == 0)
        logger.info("notifyd \(NotifydRelease.version) listening", metadata: ["socket": "\(socketPath)", "pid": "\(getpid())"])

        try await withGracefulShutdownHandler {
            try await listener.closeFuture.get()
        } onGracefulShutdown: {
            listener.close(promise: nil)
        }

        logger.info("shutting down: sending connections what they are owed")
        let closed = try await eventLoop.submit {
            state.value.broker.shutdown()
            return state.value.connections.values.map(\.closeFuture)
        }.get()
        for future in closed { try? await future.get() }
        logger.info("stopped")
    }
}

/// What the server's event loop owns besides the broker: the open connections, to wait for them on shutdown.
final class ServerState {
    let broker: Broker
    var connections: [ObjectIdentifier: any Channel] = [:]

    init(broker: Broker) {
        self.broker = broker
    }
}

extension NotifyServer: CustomStringConvertible {
    var description: String { "NotifyServer(socket: \(socketPath))" }
}
