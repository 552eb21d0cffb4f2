import ArgumentParser
import Logging
import NIOCore
import NIOPosix
import NotifyProtocol
import NotifyBroker
import ServiceLifecycle
import UnixSignals
import NotifySystem
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What the daemon does once its options are read: check the configuration, ask a running daemon to reload, or
/// serve, with the settings resolved, the socket claimed, the state loaded and the services run until a signal.
extension Notifyd {
    func run() async throws {
        if reload {
            let outcome = await ReloadRequest.run(socketPath: SocketPath.resolve(explicit: socket))
            if let sentence = outcome.sentence { StandardError.writeLine("notifyd: \(sentence)") }
            if outcome != .applied { throw ExitCode(outcome.exitStatus) }
            return
        }
        let levelSetting = LogLevelSetting(logLevel ?? .info)
        let toJournal = JournalSocket.standardErrorIsJournal()
        LoggingSystem.bootstrap { _ -> any LogHandler in
            toJournal
                ? JournalLogHandler(identifier: "notifyd", levelSetting: levelSetting)
                : StandardErrorLogHandler(identifier: "notifyd", levelSetting: levelSetting)
        }
        let logger = Logger(label: "notifyd")
        let overrides = DaemonSettings.Overrides(
            socket: socket,
            stateDirectory: stateDirectory,
            logLevel: logLevel,
            syncPolicy: sync,
            maxPayload: maxPayload,
            maxSubscriptions: maxSubscriptions,
            maxTopics: maxTopics,
            maxQueuedMessages: maxQueuedMessages,
            maxQueuedBytes: maxQueuedBytes,
            maxTopicLength: maxTopicLength,
            maxConnections: maxConnections,
            maxConnectionsPerUser: maxConnectionsPerUser,
            maxRetainedBytes: maxRetainedBytes,
            maxRetainedBytesPerUser: maxRetainedBytesPerUser,
            maxSubscriptionsPerUser: maxSubscriptionsPerUser,
            maxQueuedBytesPerUser: maxQueuedBytesPerUser,
            maxQueuedBytesTotal: maxQueuedBytesTotal,
            maxRetainedTopicsPerUser: maxRetainedTopicsPerUser,
            maxUnreadBytesPerUser: maxUnreadBytesPerUser,
            maxUnreadBytesTotal: maxUnreadBytesTotal,
            historyMessages: historyMessages,
            historyBytes: historyBytes,
            fleetUser: fleetUser
        )
        let configurationFile = checkedFile ?? config
        if checkConfig {
            do {
                let checked = try await DaemonSettings.load(overrides: overrides, configurationFile: configurationFile)
                let (path, isExplicit) = DaemonSettings.configurationPath(explicit: configurationFile)
                let exists = access(path, F_OK) == 0
                print("# \(path): \(exists || isExplicit ? "usable" : "absent, so the defaults apply")")
                print(checked.summary)
                return
            } catch {
                StandardError.writeLine("notifyd: \(error)")
                throw ExitCode(78)
            }
        }
        let settings: DaemonSettings
        do {
            settings = try await DaemonSettings.load(overrides: overrides, configurationFile: configurationFile)
        } catch {
            logger.log(.startFailed, .critical, "\(error)", ["reason": "configuration"])
            throw ExitCode(78)
        }
        levelSetting.current = settings.logLevel
        let openFiles = FileDescriptorLimit.raiseToMaximum()
        if openFiles < UInt64(settings.broker.maxConnections) + 64 {
            logger.log(
                .openFilesLimited,
                .warning,
                "open files are limited to \(openFiles), fewer than max-connections (\(settings.broker.maxConnections)) needs; raise LimitNOFILE= or lower max-connections"
            )
        }

        // Before the event loop's thread exists, so that it allocates from the heap the idle trim reaches.
        MemoryTrimmer.keepFreedMemoryWhileBusy()
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let server = NotifyServer(
            settings: settings,
            reloadSettings: { try await DaemonSettings.load(overrides: overrides, configurationFile: configurationFile) },
            levelSetting: levelSetting,
            eventLoop: group.next(),
            logger: logger
        )
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
            logger.log(.startFailed, .critical, "\(error.description)", ["reason": "socket"])
            try? await group.shutdownGracefully()
            throw ExitCode(73)
        } catch let error as StateLogError {
            logger.log(.startFailed, .critical, "state directory: \(error.description)", ["reason": "state"])
            try? await group.shutdownGracefully()
            throw ExitCode(73)
        }
        try await group.shutdownGracefully()
    }
}
