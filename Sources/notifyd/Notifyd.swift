public import ArgumentParser
public import Logging
import NIOCore
import NIOPosix
import NotifyBus
import ServiceLifecycle
import UnixSignals

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

@main
struct Notifyd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "notifyd",
        abstract: "The notifyd daemon: a notification center for one host, on a Unix socket.",
        discussion: """
            Any local process may publish to a named topic and subscribe to topics and patterns; the daemon keeps the \
            latest message of each topic so a newcomer can ask for it. The protocol is described in PROTOCOL.md; the \
            `notify` command is its client.

            The socket is --socket, else $NOTIFYD_SOCKET, else /run/notifyd/notifyd.sock for root and \
            $XDG_RUNTIME_DIR/notifyd/notifyd.sock for other users (/run/user/UID when XDG_RUNTIME_DIR is unset, \
            /tmp/notifyd-UID when that does not exist either). Missing directories are created. A socket left by a \
            daemon that died is replaced; a live daemon's socket is never taken.

            SIGTERM or SIGINT stops the daemon gracefully: it stops accepting, sends every connection what it is \
            owed (at most 5 seconds each), and removes its socket.

            Exit status: 0 after a graceful stop; 64 for bad options; 73 when the socket cannot be claimed (another \
            daemon runs there, or the path is unusable); 1 for any other failure.
            """,
        version: NotifydRelease.version
    )

    @Option(name: .long, help: ArgumentHelp("The socket to listen on.", valueName: "path"))
    var socket: String?

    @Option(name: .long, help: "The least important log level shown: trace, debug, info, notice, warning, error or critical.")
    var logLevel: Logger.Level = .info

    @Option(name: .long, help: ArgumentHelp("The largest payload accepted, in bytes.", valueName: "bytes"))
    var maxPayload: Int = ProtocolLimits.default.maxPayload

    @Option(name: .long, help: ArgumentHelp("The most subscriptions one connection may hold.", valueName: "count"))
    var maxSubscriptions: Int = BrokerConfiguration.default.maxSubscriptionsPerConnection

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The most topics tracked; past it, topics without a buffered message are forgotten, oldest first.",
            valueName: "count"
        )
    )
    var maxTopics: Int = BrokerConfiguration.default.maxTopics

    func validate() throws {
        guard maxPayload >= 0 else { throw ValidationError("--max-payload must be 0 or more") }
        guard maxSubscriptions >= 1 else { throw ValidationError("--max-subscriptions must be at least 1") }
        guard maxTopics >= 1 else { throw ValidationError("--max-topics must be at least 1") }
    }

    func run() async throws {
        let logLevel = self.logLevel
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = logLevel
            return handler
        }
        let logger = Logger(label: "notifyd")
        let path = SocketPath.resolve(explicit: socket)
        var limits = ProtocolLimits.default
        limits.maxPayload = maxPayload
        let configuration = BrokerConfiguration(
            protocolLimits: limits,
            maxSubscriptionsPerConnection: maxSubscriptions,
            maxTopics: maxTopics
        )

        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let server = NotifyServer(socketPath: path, configuration: configuration, eventLoop: group.next(), logger: logger)
        let services = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [server],
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger
            )
        )
        do {
            try await services.run()
        } catch let error as SocketFileError {
            logger.critical("\(error.description)")
            try? await group.shutdownGracefully()
            throw ExitCode(73)
        }
        try await group.shutdownGracefully()
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}
