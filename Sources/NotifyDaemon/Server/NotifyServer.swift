import Logging
import NIOCore
import NIOPosix
import NotifyProtocol
import NotifyBroker
import ServiceLifecycle
import UnixSignals

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Serves the protocol on a Unix socket until graceful shutdown: the daemon's one long-running service.
///
/// One event loop runs the listener, every connection and the broker, so broker state is never shared between
/// threads. In order, it:
/// 1. takes the socket systemd passed (socket activation), or claims its path;
/// 2. loads the saved state;
/// 3. tells the service manager it is ready (`READY=1`), then keeps `STATUS=` current and pings the watchdog;
/// 4. on SIGHUP, reloads the configuration (`RELOADING=1`, then `READY=1`);
/// 5. on SIGTERM or SIGINT (`STOPPING=1`), stops accepting, sends every connection what it is owed and
///    `ERR unavailable` (each gets `ChannelTransport.closeGrace` at most), saves the exact state, and removes the
///    socket file it created (never one systemd passed).
struct NotifyServer: Service {
    let settings: DaemonSettings
    /// Reads the configuration again, for SIGHUP.
    let reloadSettings: @Sendable () async throws -> DaemonSettings
    let levelSetting: LogLevelSetting
    let eventLoop: any EventLoop
    let logger: Logger

    func run() async throws {
        let serviceManager = ServiceManager()
        let inherited = try SocketActivation.inheritedListener()
        let socketFile = try inherited == nil ? SocketFile(claiming: settings.socketPath, logger: logger) : nil
        defer { socketFile?.remove() }

        let state = try await loadState()
        let listener = try await listen(state: state, inherited: inherited)
        socketFile?.setMode(systemWide: getuid() == 0)
        let status = try await eventLoop.submit { StatusReporter(state: state) }.get()
        let served = listener.localAddress?.pathname ?? settings.socketPath
        var metadata: Logger.Metadata = ["socket": "\(served)", "state_dir": "\(settings.stateDirectory)"]
        if inherited != nil { metadata["activation"] = "socket" }
        logger.log(.started, .notice, "notifyd \(NotifydRelease.version) listening", metadata)
        // SIGHUP is trapped before READY=1: a reload sent the moment systemd hears it must find the handler in
        // place, not SIGHUP's default action, which ends the process (and systemd counts that as a clean exit).
        let hangups = await UnixSignalsSequence(trapping: .sighup)
        serviceManager.ready(status: try await status.text(on: eventLoop))
        var timers = try await startTimers(status: status, serviceManager: serviceManager)
        timers.append(eventLoop.scheduleRepeatedTask(initialDelay: MemoryTrimmer.interval, delay: MemoryTrimmer.interval) { _ in
            let broker = state.value.broker
            let connections = state.value.connections
            state.value.trimmer.tick(work: broker.activity) {
                broker.releaseIdleMemory()
                connections.releaseIdleMemory()
            }
        })

        try await withThrowingDiscardingTaskGroup { group in
            group.addTask {
                try await reloadOnHangup(hangups, state: state, status: status, serviceManager: serviceManager)
            }
            try await withGracefulShutdownHandler {
                try await listener.closeFuture.get()
            } onGracefulShutdown: {
                serviceManager.stopping(status: "stopping: sending connections what they are owed")
                listener.close(promise: nil)
            }
            group.cancelAll()
        }
        for timer in timers { timer.cancel() }

        logger.log(.stopping, .notice, "stopping: sending connections what they are owed")
        let closed = try await eventLoop.submit {
            state.value.broker.shutdown()
            return state.value.connections.closeFutures
        }.get()
        for future in closed { try? await future.get() }
        try await eventLoop.submit {
            do {
                try state.value.broker.saveState()
            } catch {
                logger.log(.stateProblem, .error, "could not save the state on shutdown: \(error)")
            }
        }.get()
        let syncThread = try await eventLoop.submit { state.value.broker.stateSyncer as? StateLogSyncThread }.get()
        await syncThread?.stop()
        logger.log(.stopped, .notice, "stopped")
    }

    /// Opens the state log and builds the broker from it, on the event loop that will own both.
    private func loadState() async throws -> NIOLoopBound<ServerState> {
        let settings = self.settings
        let logger = self.logger
        let eventLoop = self.eventLoop
        let (state, report) = try await eventLoop.submit {
            let (log, contents) = try StateLog.open(
                directory: settings.stateDirectory,
                syncPolicy: settings.syncPolicy
            )
            let broker = Broker(configuration: settings.broker)
            broker.groupsOfUser = { systemGroups(ofUser: $0) }
            broker.attach(log, restoring: contents)
            if settings.syncPolicy == .always { broker.stateSyncer = StateLogSyncThread(eventLoop: eventLoop) }
            let state = ServerState(broker: broker)
            broker.onEvent = { [unowned state] event in
                state.log(event, logger: logger)
                // The rewrite is tried again when its pause ends, whether or not a client comes by then.
                if case .stateNotSaved(_, let pause) = event {
                    // A millisecond late, so that the broker's clock has passed the pause too.
                    eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(pause) + .milliseconds(1)) { [weak state] in
                        state?.broker.retrySavingState()
                    }
                }
            }
            let buffered = contents.topics.values.count { $0.retainedFrame != nil }
            let report = (problems: contents.problems, keptAside: contents.keptAside, topics: contents.topics.count, buffered: buffered)
            return (NIOLoopBound(state, eventLoop: eventLoop), report)
        }.get()
        for problem in report.problems {
            logger.log(.stateProblem, .warning, "state: \(problem)", ["state_dir": "\(settings.stateDirectory)"])
        }
        if let aside = report.keptAside {
            logger.log(.stateProblem, .error, "the damaged state file was kept as \(aside); what could be read is loaded")
        }
        logger.log(.stateLoaded, .info, "state loaded: \(report.topics) topics, \(report.buffered) buffered messages")
        return state
    }

    private func listen(state: NIOLoopBound<ServerState>, inherited: CInt?) async throws -> any Channel {
        let logger = self.logger
        let bootstrap = ServerBootstrap(group: eventLoop)
            .serverChannelOption(.backlog, value: 256)
            // A subscriber that keeps up never fills this; one that does not gets the broker's bounded queue.
            .childChannelOption(.recvAllocator, value: NotifyServer.receiveAllocator)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let server = state.value
                    // Limits as configured now: a reload changes them for new connections.
                    let limits = server.broker.configuration.protocolLimits
                    try channel.syncOptions?.setOption(
                        .writeBufferWaterMark,
                        value: NotifyServer.writeBufferWaterMark(high: server.broker.configuration.writeBufferBytes)
                    )
                    try channel.pipeline.syncOperations.addHandler(
                        BrokerConnectionHandler(
                            broker: server.broker,
                            decoder: RequestDecoder(limits: limits),
                            logger: logger,
                            connections: server.connections
                        )
                    )
                }
            }
        if let inherited {
            return try await bootstrap.withBoundSocket(inherited).get()
        }
        return try await bootstrap.bind(unixDomainSocketPath: settings.socketPath).get()
    }

    /// `STATUS=` every two seconds and the watchdog ping, both from the event loop, so a stuck loop shows.
    private func startTimers(status: StatusReporter, serviceManager: ServiceManager) async throws -> [RepeatedTask] {
        guard serviceManager.isPresent else { return [] }
        var timers = [
            eventLoop.scheduleRepeatedTask(initialDelay: .seconds(2), delay: .seconds(2)) { _ in
                serviceManager.status(status.update())
            }
        ]
        if let interval = serviceManager.watchdogInterval {
            let half = TimeAmount(interval / 2)
            timers.append(eventLoop.scheduleRepeatedTask(initialDelay: .zero, delay: half) { _ in serviceManager.watchdog() })
        }
        return timers
    }

    /// Reloads the configuration on every SIGHUP of `hangups`; a file that cannot be used leaves the running
    /// configuration in force.
    private func reloadOnHangup(
        _ hangups: UnixSignalsSequence,
        state: NIOLoopBound<ServerState>,
        status: StatusReporter,
        serviceManager: ServiceManager
    ) async throws {
        var current = settings
        for await _ in hangups {
            serviceManager.reloading()
            do {
                let (applied, ignored) = current.reloadable(from: try await reloadSettings())
                levelSetting.current = applied.logLevel
                try await eventLoop.submit { state.value.broker.reconfigure(applied.broker) }.get()
                current = applied
                var metadata: Logger.Metadata = ["log_level": "\(applied.logLevel)"]
                if !ignored.isEmpty { metadata["needs_restart"] = "\(ignored.joined(separator: ","))" }
                logger.log(.reloaded, .notice, "configuration reloaded", metadata)
                try await eventLoop.submit { state.value.broker.recordReload(applied: true) }.get()
            } catch {
                logger.log(.reloadFailed, .error, "configuration not reloaded, the previous one stays in force: \(error)")
                try await eventLoop.submit { state.value.broker.recordReload(applied: false) }.get()
            }
            serviceManager.ready(status: try await status.text(on: eventLoop))
        }
    }
}

extension NotifyServer: CustomStringConvertible {
    var description: String { "NotifyServer(socket: \(settings.socketPath))" }
}

/// What the server's event loop owns: the broker, the open connections (to wait for them on shutdown), and
/// the rate limiter of the broker's log events.
final class ServerState {
    let broker: Broker
    let connections = OpenConnections()
    /// Gives freed memory back to the system once the daemon is idle.
    var trimmer = MemoryTrimmer()
    private var limiter = EventRateLimiter()

    init(broker: Broker) {
        self.broker = broker
    }

    /// Logs a broker event: clears at info, refusals that concern an administrator (not permitted, limits) at
    /// notice and the rest at debug, each kind rate-limited.
    func log(_ event: BrokerEvent, logger: Logger) {
        switch event {
        case .cleared(let topic, let peer):
            guard var metadata = admit(.messageCleared, peer) else { return }
            metadata["topic"] = "\(topic)"
            logger.log(.messageCleared, .info, "buffered message of \(topic) cleared", metadata)
        case .refused(let error, let subject, let peer):
            guard var metadata = admit(.publishRefused, peer) else { return }
            metadata["code"] = "\(error.code)"
            if let subject { metadata["topic"] = "\(subject)" }
            let important = error.code == .notPermitted || error.code == .limitReached
            logger.log(.publishRefused, important ? .notice : .debug, "refused: \(error.message)", metadata)
        case .stateNotSaved(let problem, _):
            guard let metadata = admit(.stateProblem, nil) else { return }
            logger.log(
                .stateProblem,
                .error,
                "the state could not be saved (\(problem)); retained publishes are refused and acknowledgements it cannot back are withdrawn until it is rewritten",
                metadata
            )
        case .stateSavedAgain:
            logger.log(.stateProblem, .notice, "the state log is written again; retained publishes are accepted again", [:])
        case .dropped(let count, let peer):
            guard var metadata = admit(.messagesDropped, peer) else { return }
            metadata["dropped"] = "\(count)"
            logger.log(.messagesDropped, .notice, "dropped \(count) messages for a subscriber that fell behind", metadata)
        case .disconnectedSlowSubscriber(let peer, let queued):
            guard var metadata = admit(.subscriberDisconnected, peer) else { return }
            metadata["queued"] = "\(queued)"
            logger.log(.subscriberDisconnected, .warning, "disconnected a subscriber that fell behind (its policy is disconnect)", metadata)
        }
    }

    /// The metadata to log `event` with, or nil when the rate limiter holds it back. Checked first, so a refusal
    /// repeated in a loop costs no more than counting it.
    private func admit(_ event: DaemonEvent, _ peer: PeerCredentials?) -> Logger.Metadata? {
        let (admitted, suppressed) = limiter.admit(event)
        guard admitted else { return nil }
        var metadata = peer?.logMetadata ?? [:]
        if suppressed > 0 { metadata["suppressed"] = "\(suppressed)" }
        return metadata
    }
}

/// The one-line status for `systemctl status`: connections, topics, subscriptions and message rates.
final class StatusReporter: Sendable {
    private let state: NIOLoopBound<ServerState>
    private let previous: NIOLoopBound<Box>

    private final class Box {
        var messagesIn: UInt64 = 0
        var messagesOut: UInt64 = 0
        var time = NIODeadline.now()
    }

    /// Made on the event loop, where its state lives.
    init(state: NIOLoopBound<ServerState>) {
        self.state = state
        self.previous = NIOLoopBound(Box(), eventLoop: state.eventLoop)
    }

    /// The status now, with rates since the last call. On the event loop.
    func update() -> String {
        let statistics = state.value.broker.statistics
        let box = previous.value
        let now = NIODeadline.now()
        let seconds = max(Double((now - box.time).nanoseconds) / 1e9, 0.001)
        let rateIn = Double(statistics.messagesIn - box.messagesIn) / seconds
        let rateOut = Double(statistics.messagesOut - box.messagesOut) / seconds
        box.messagesIn = statistics.messagesIn
        box.messagesOut = statistics.messagesOut
        box.time = now
        let status = "\(statistics.connections) connections, \(statistics.topics) topics (\(statistics.retainedTopics) buffered), "
            + "\(statistics.subscriptions) subscriptions, \(Self.rate(rateIn)) msg/s in, \(Self.rate(rateOut)) msg/s out"
        guard let problem = state.value.broker.stateProblem else { return status }
        return status + "; STATE LOG FAILING, retained publishes refused: \(problem)"
    }

    /// A rate as people read it: whole numbers from 10 up, one decimal below, so a message every few seconds does
    /// not read as none.
    static func rate(_ perSecond: Double) -> String {
        if perSecond >= 9.95 { return String(Int(perSecond.rounded())) }
        let tenths = Int((perSecond * 10).rounded())
        return tenths % 10 == 0 ? String(tenths / 10) : "\(tenths / 10).\(tenths % 10)"
    }

    func text(on eventLoop: any EventLoop) async throws -> String {
        try await eventLoop.submit { self.update() }.get()
    }
}

extension NotifyServer {
    /// A connection's write buffer marks: past `high` bytes it stops taking frames (its queue takes them, under its
    /// overflow policy), below a quarter of that it takes them again. NIO traps on a low mark under 1, which a
    /// `max-queued-bytes` under 8 gave.
    static func writeBufferWaterMark(high: Int) -> ChannelOptions.Types.WriteBufferWaterMark {
        .init(low: max(1, high / 4), high: max(1, high))
    }

    /// How big a buffer a connection reads into. NIO keeps a connection's receive buffer, at the largest size it was
    /// asked for, from its first read until the connection closes, and most connections are idle subscribers that
    /// sent a line or two: so the first is 64 bytes (NIO's default is 2 KiB; 256 cost each idle subscriber 193 bytes
    /// more, see docs/performance.md, "Per connection"), and one that fills its buffer gets twice that next, up to 64 KiB for a
    /// busy publisher.
    static var receiveAllocator: AdaptiveRecvByteBufferAllocator {
        AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 64, maximum: 64 << 10)
    }
}
