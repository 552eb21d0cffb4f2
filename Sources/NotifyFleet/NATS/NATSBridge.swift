package import Logging
import NATSClient
package import NIOCore
import NotifyProtocol

/// The fleet service's link to a NATS cluster: this host's publishes (the daemon's exports, through
/// ``DaemonLink``) go out as NATS messages, other hosts' come in and go to the daemon as `IMPORT`s stamped with
/// their origin (docs/federation.md).
///
/// It lives on the fleet's one event loop with the daemon's link, so an export reaches the NATS connection's buffer
/// without a hop between threads. It never makes a local publish wait: what NATS cannot take now waits in the bounded
/// ``ExportOutbox``, and a lost server only means reconnecting, with backoff, to the next one of the list. While the
/// daemon is not linked, it stays off NATS: other hosts' messages wait in the stream for it.
///
/// Subjects: `<prefix>.<topic>` for every message; a retained one also goes to `<prefix>-latest.<topic>`, which a
/// JetStream stream (`<prefix>_latest`, one message per subject, as NATS's key-value buckets keep them) holds, so a
/// host that connects later reads the fleet's latest message of each topic.
package final class NATSBridge {
    let link: DaemonLink
    let eventLoop: any EventLoop
    let logger: Logger
    package private(set) var settings: BridgeSettings
    var outbox: ExportOutbox
    /// The window's newest retained message of each topic, for the stream of latest messages.
    var latest = LatestCoalescer()
    var latestIsScheduled = false
    var encoder: ExportEncoder
    var exports: FleetTopics
    var connection: NATSConnection?
    /// Which server of the list is used or tried, and how long until the next attempt.
    var rotation = ServerRotation()
    /// Bumped whenever a connection ends or the settings change, so that callbacks of an older one do nothing.
    var generation: UInt64 = 0
    var isStopped = false
    /// Whether exports may go out on the connection: once the stream of latest messages was made (or could not be),
    /// so that the retained messages they carry find it.
    var isReady = false
    /// Whether the stream of latest messages was made or found once (on any connection of the same settings).
    var streamIsKnown = false
    var sendIsScheduled = false
    /// What the bridge counts for `STATS`.
    var counts = BridgeCounts()
    /// The counters the daemon has, as last sent.
    var lastReported: [ServerStats.Counter]?
    var overflowReported: UInt64 = 0
    /// An export the outbox had no room for while NATS was taking what it holds: it waits, and the daemon's frames
    /// after it wait unread (``DaemonLink/pauseReading()``), until an acknowledgement makes room.
    var waitingExport: FleetExport?
    /// What becomes of a message read from NATS: the `IMPORT` that hands it to the daemon, which tells repeats and
    /// checks every claim.
    var forwarder: ImportForwarder
    /// The topic each subject read from NATS names here, checked once per subject against the import patterns.
    var subjectTopics: SubjectTopicCache

    /// The largest message (headers and payload) the server takes, from its `INFO`; NATS's default until one is read.
    var serverMaxPayload = 1 << 20
    var sameNameMessages: UInt64 = 0
    /// Which live messages are taken in at once, and which wait for their origin's log (catch-up on).
    var sequencer = OriginSequencer<NATSMessage>()
    /// The reads of the log under way on this connection, catch-up's and repairs, and how far catch-up is.
    var logReads = LogReads()
    /// Where this host stands in the log as the daemon confirmed it, and the state file that keeps it.
    var positions: PositionKeeper
    /// Where this host's records go, and where their acknowledgements come.
    var logSubject: String
    /// Where this host's head goes, and the export number it last said.
    var headSubject: String
    var headWritten: UInt64 = 0
    var headIsScheduled = false
    let logInbox = "_INBOX.\(UInt64.random(in: 1...UInt64.max)).log"
    /// When a record was last acknowledged.
    var lastAcknowledgement = NIODeadline.now()
    var earlierStreamNoted = false
    var unconfirmedNoted: UInt64 = 0
    /// The replays of the latest messages under way on this connection (done ones too, until it ends): failed when it
    /// is let go of, so that none waits for ever.
    var replays: [EventLoopPromise<Void>] = []

    /// How long retained messages of one topic are coalesced into one write to the stream of latest messages.
    static let latestWindow = TimeAmount.milliseconds(5)
    static let keepAliveInterval = TimeAmount.seconds(10)

    /// Made on the event loop; call ``start()`` there.
    /// `stateDirectory`: where this host keeps where it stands in the fleet's log (none: in memory only, so a
    /// restart starts from the log's end).
    package init(settings: BridgeSettings, link: DaemonLink, eventLoop: any EventLoop, logger: Logger, stateDirectory: String? = nil) {
        self.settings = settings
        self.link = link
        self.eventLoop = eventLoop
        self.logger = logger
        self.forwarder = ImportForwarder(hostName: settings.hostName)
        self.outbox = ExportOutbox(limit: settings.outboxBytes)
        self.encoder = ExportEncoder(prefix: settings.prefix, hostName: settings.hostName, numbers: settings.catchUpSeconds > 0)
        self.exports = FleetTopics(settings.exports)
        self.subjectTopics = SubjectTopicCache(imports: FleetTopics(settings.imports))
        self.logSubject = JetStreamLog(settings: settings).subject(of: settings.hostName)
        self.headSubject = JetStreamLog(settings: settings).headSubject(of: settings.hostName)
        self.positions = PositionKeeper(stateDirectory: stateDirectory)
        loadPositions()
    }

    /// Reads where this host stood (the state file of the settings' prefix); a file that does not read is said and
    /// left for the next write to replace.
    func loadPositions() {
        do {
            try positions.load(prefix: settings.prefix)
        } catch {
            logger.log(.natsProblem, .error, "\(positions.path ?? "") cannot be used (\(error)): this host starts from the end of the fleet's log, and takes in nothing it missed before")
        }
        sequencer.restore(positions.confirmed.origins)
    }

    /// Links to the daemon, and connects to NATS once it is linked (and again after each time it is).
    package func start() {
        link.exportPatterns = settings.exports
        link.onExport = { [unowned self] message in export(message) }
        link.onLinked = { [unowned self] in
            lastReported = nil
            reportCounters()
            if connection == nil {
                // An attempt begun before the link was lost is stale.
                generation += 1
                connect()
            }
        }
        link.onLost = { [unowned self] in
            fallBackToConfirmedPositions()
            drop(connection, reason: "the link to the daemon was lost")
        }
        link.start()
        reportChanges()
    }

    /// The counters go to the daemon when they change, looked at every ``reportInterval``: `notify stats` is at most
    /// that much behind, and a burst of messages costs the link a report per interval, not one per message.
    private func reportChanges() {
        eventLoop.assumeIsolated().scheduleTask(in: Self.reportInterval) { [weak self] in
            guard let self, !isStopped else { return }
            reportCounters()
            reportChanges()
        }
    }

    /// Sends the counters to the daemon, unless they are the ones it has.
    func reportCounters() {
        let now = counters
        guard now != lastReported, link.isLinked else { return }
        if link.send(Request(.fleetStats(ServerStats(counters: now)))) { lastReported = now }
    }

    static let reportInterval = TimeAmount.milliseconds(20)

    /// Applies new settings (SIGHUP). Another server list, prefix or import list means a new connection; what waits in
    /// the outbox is kept.
    package func reconfigure(_ newer: BridgeSettings) {
        let reconnects = newer.servers != settings.servers || newer.prefix != settings.prefix || newer.imports != settings.imports
            || newer.hostName != settings.hostName || newer.security != settings.security
            || newer.catchUpSeconds != settings.catchUpSeconds || newer.catchUpBytes != settings.catchUpBytes
        let older = settings
        settings = newer
        outbox.limit = newer.outboxBytes
        if newer.prefix != older.prefix || newer.hostName != older.hostName {
            // Another log, or another origin in it: numbers start again under a new epoch.
            writePositions()
            encoder = ExportEncoder(prefix: newer.prefix, hostName: newer.hostName, numbers: newer.catchUpSeconds > 0)
            logSubject = JetStreamLog(settings: newer).subject(of: newer.hostName)
            headSubject = JetStreamLog(settings: newer).headSubject(of: newer.hostName)
            headWritten = 0
            loadPositions()
        }
        encoder.numbers = newer.catchUpSeconds > 0
        exports = FleetTopics(newer.exports)
        // Emptied too: a subject's topic depends on the prefix as well.
        subjectTopics = SubjectTopicCache(imports: FleetTopics(newer.imports))
        if link.exportPatterns != newer.exports {
            // FOLLOW again with the new patterns: at once if linked, else when the link is made.
            link.exportPatterns = newer.exports
            link.send(Request(.follow(newer.exports)))
        }
        if reconnects {
            rotation.startOver()
            streamIsKnown = false
            forwarder.hostName = newer.hostName
            drop(connection, reason: "its settings changed")
        }
    }

    /// Stops: sends what the outbox holds if a server takes it within `grace`, then closes. Returns how many
    /// messages were never confirmed.
    package func stop(grace: TimeAmount) -> EventLoopFuture<Int> {
        // Where this host stands, as the daemon confirms it now: a restart reads the log from there.
        let snapshot = positions.snapshot(of: sequencer.positions)
        guard link.isLinked else { return stopNow(grace: grace) }
        let answered = eventLoop.makePromise(of: Bool.self)
        let isAnswered = NIOLoopBoundBox(false, eventLoop: eventLoop)
        func answer(_ confirmed: Bool) {
            guard !isAnswered.value else { return }
            isAnswered.value = true
            answered.succeed(confirmed)
        }
        link.sync().assumeIsolated().whenComplete { answer((try? $0.get()) != nil) }
        let deadline = eventLoop.assumeIsolated().scheduleTask(in: .seconds(2)) { answer(false) }
        return answered.futureResult.assumeIsolated().flatMap { [self] confirmed in
            deadline.cancel()
            if confirmed { positions.confirm(snapshot) }
            return stopNow(grace: grace)
        }.nonisolated()
    }

    private func stopNow(grace: TimeAmount) -> EventLoopFuture<Int> {
        link.stop()
        writeLatest()
        stopReads()
        writePositions()
        isStopped = true
        generation += 1
        guard let connection else {
            logger.log(.natsDisconnected, .notice, "left NATS (the link is stopped); \(outbox.count) messages were not sent")
            return eventLoop.makeSucceededFuture(outbox.count)
        }
        drain()
        let confirmed = eventLoop.makePromise(of: Void.self)
        let mark = outbox.sentThrough
        connection.flush(confirmed: confirmed)
        let deadline = eventLoop.scheduleTask(in: grace) { confirmed.fail(NATSError("not confirmed in time")) }
        let logged = sequencing
        return confirmed.futureResult.assumeIsolated().flatMap { [self] in
            // With the log, a chunk is confirmed by its record's acknowledgement, which may come after the PONG.
            if !logged { outbox.confirm(through: mark) }
            return whenAcknowledged(through: mark, before: .now() + grace)
        }.map { [self] in
            deadline.cancel()
            writeHead()
            return outbox.count
        }.recover { _ in self.outbox.count }.flatMap { [self] unsent in
            self.connection = nil
            logger.log(.natsDisconnected, .notice, "left NATS (the link is stopped); \(unsent) messages were not confirmed")
            // Closed before the future succeeds: the caller shuts the event loop down next, and a close still under
            // way would then be cut short on a loop that takes no more tasks.
            let closed = eventLoop.makePromise(of: Int.self)
            Task {
                await connection.close()
                closed.succeed(unsent)
            }
            return closed.futureResult
        }.nonisolated()
    }

    /// Succeeds once every chunk before `mark` is confirmed, or at `deadline`.
    func whenAcknowledged(through mark: UInt64, before deadline: NIODeadline) -> EventLoopFuture<Void> {
        guard outbox.confirmedThrough < mark, NIODeadline.now() < deadline else { return eventLoop.makeSucceededVoidFuture() }
        return eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(5)) {}.futureResult.assumeIsolated().flatMap { [self] in
            whenAcknowledged(through: mark, before: deadline)
        }.nonisolated()
    }

    // MARK: Connecting

    func connect() {
        // Off NATS while the daemon is not linked: what other hosts publish waits in the stream for this host.
        guard !isStopped, link.isLinked else { return }
        let server = currentServer
        let generation = self.generation
        let name = "notifyd \(settings.hostName)"
        let tls = settings.tls(for: server)
        let credentials = settings.security.credentials
        let eventLoop = self.eventLoop
        let bridge = NIOLoopBound(self, eventLoop: eventLoop)
        Task {
            do {
                let connection = try await NATSConnection.connect(
                    host: server.host,
                    port: server.port,
                    name: name,
                    echo: false,
                    tls: tls,
                    credentials: credentials,
                    group: eventLoop
                )
                eventLoop.execute { bridge.value.connected(connection, to: server, generation: generation) }
            } catch {
                eventLoop.execute { bridge.value.connectFailed(server, error: error, generation: generation) }
            }
        }
    }

    func connected(_ connection: NATSConnection, to server: BridgeSettings.Server, generation: UInt64) {
        guard generation == self.generation, !isStopped else {
            Task { await connection.close() }
            return
        }
        self.connection = connection
        serverMaxPayload = JSONScan.integer("max_payload", in: connection.serverInfo).map { max(1, $0) } ?? serverMaxPayload
        // A chunk is one record of the log: within max_payload, with room for the record's own line.
        outbox.largestChunk = max(1, serverMaxPayload - 256)
        counts.connects += 1
        rotation.connected(at: .now())
        logReads.catchUpUnavailable = false
        // Only until the stream is known to exist: later connections need not wait for JetStream to answer, but
        // with catch-up each waits until the log is there to keep what it sends.
        isReady = streamIsKnown && settings.catchUpSeconds == 0
        // Weakly: a connection being closed may call back after a reload has let go of the bridge.
        connection.setOnClosed { [weak self] error in self?.disconnected(error, generation: generation) }
        connection.setOnWritable { [weak self] in self?.scheduleSend() }
        // With catch-up, live messages wait until the log is read from where this host stands (readLatest).
        link.redeliversLostImports = sequencing
        if sequencing {
            sequencer.restore(sequencer.positions)
            sequencer.beginCatchUp()
            subscribeAcknowledgements(over: connection, generation: generation)
            subscribeHeads(over: connection, generation: generation)
            lastAcknowledgement = .now()
            watchAcknowledgements(generation: generation)
        }
        subscribeLive(over: connection)
        // Said once the server has the subscriptions: from then on, what any host publishes reaches this one.
        let subscribed = eventLoop.makePromise(of: Void.self)
        connection.flush(confirmed: subscribed)
        let waiting = outbox.count
        subscribed.futureResult.assumeIsolated().whenSuccess { [self] in
            guard generation == self.generation else { return }
            logger.log(
                .natsConnected,
                .notice,
                "connected to NATS at \(server) as host \(settings.hostName), subscribed; \(waiting) messages waiting in the outbox are sent now",
                ["nats_server": "\(server)", "host_name": "\(settings.hostName)"]
            )
        }
        outbox.resendUnconfirmed()
        // What waits goes out now if the stream is known, else once it is made (readLatest).
        scheduleSend()
        readLatest(over: connection, generation: generation)
        keepAlive(generation: generation)
    }

    /// Records not acknowledged within ``acknowledgementDeadline`` are sent again on the same connection: a stream
    /// whose leader died answers nothing for them, and other hosts wait for them to fill their gaps.
    func watchAcknowledgements(generation: UInt64) {
        eventLoop.assumeIsolated().scheduleTask(in: .seconds(1)) { [weak self] in
            guard let self, generation == self.generation, connection != nil, sequencing else { return }
            if outbox.hasUnconfirmedSent, NIODeadline.now() - lastAcknowledgement > Self.acknowledgementDeadline {
                counts.resentRecords += 1
                lastAcknowledgement = .now()
                outbox.resendUnconfirmed()
                scheduleSend()
            }
            watchAcknowledgements(generation: generation)
        }
    }

    static let acknowledgementDeadline = TimeAmount.seconds(2)

    /// A `PING` every ``keepAliveInterval``; a connection that does not answer within another is closed (and so
    /// replaced): a server gone without a word (a partition, a half-open connection) would otherwise look connected
    /// while nothing is confirmed.
    func keepAlive(generation: UInt64) {
        eventLoop.assumeIsolated().scheduleTask(in: Self.keepAliveInterval) { [weak self] in
            guard let self, generation == self.generation, let connection = self.connection else { return }
            // Records sent and not acknowledged for as long: the stream is not storing them (its leader lost, say);
            // another connection sends them again.
            if sequencing, outbox.hasUnconfirmedSent, NIODeadline.now() - lastAcknowledgement > Self.keepAliveInterval {
                logger.log(.natsProblem, .warning, "NATS did not acknowledge this host's log records for \(Self.keepAliveInterval.nanoseconds / 1_000_000_000) s: reconnecting, and sending them again")
                connection.closeNow()
                return
            }
            let answered = eventLoop.makePromise(of: Void.self)
            connection.flush(confirmed: answered)
            let deadline = eventLoop.assumeIsolated().scheduleTask(in: Self.keepAliveInterval) { [weak self] in
                guard let self, generation == self.generation else { return }
                logger.log(.natsDisconnected, .warning, "NATS did not answer a PING within \(Self.keepAliveInterval.nanoseconds / 1_000_000_000) s: reconnecting")
                connection.closeNow()
            }
            answered.futureResult.assumeIsolated().whenComplete { [weak self] result in
                deadline.cancel()
                if case .success = result { self?.keepAlive(generation: generation) }
            }
        }
    }

    func connectFailed(_ server: BridgeSettings.Server, error: any Error, generation: UInt64) {
        guard generation == self.generation, !isStopped else { return }
        rotation.attemptFailed()
        if let refusal = error as? NATSError, refusal.isAuthorizationFailure {
            loginRefused(by: server, refusal)
        } else if rotation.failureIsWorthLogging {
            logger.log(
                .natsDisconnected,
                .warning,
                "cannot reach NATS at \(server) (\(error)); local publish and subscribe go on, exports wait in the outbox (\(outbox.count) now), trying the servers again",
                ["nats_server": "\(server)", "attempts": "\(rotation.failedAttempts)"]
            )
        }
        scheduleReconnect()
    }

    func disconnected(_ error: NATSError, generation: UInt64) {
        guard generation == self.generation else { return }
        let server = currentServer
        stopReads()
        connection = nil
        self.generation += 1
        outbox.resendUnconfirmed()
        retryWaitingExport()
        rotation.disconnected(at: .now())
        guard !isStopped else { return }
        if error.isAuthorizationFailure {
            // A user whose JWT expired or was revoked, or a password changed on the server: said as a refused login.
            loginRefused(by: server, error)
            scheduleReconnect()
            return
        }
        logger.log(
            .natsDisconnected,
            .warning,
            "lost NATS at \(server) (\(error)); exports wait in the outbox (\(outbox.count) now) until a server takes them",
            ["nats_server": "\(server)"]
        )
        scheduleReconnect()
    }

    /// A server refused the login: counted, in the journal (the first of a run and every hundredth), and on `STATUS=`
    /// until a login succeeds. The bridge goes on trying, with backoff: the credentials may be fixed by a reload.
    func loginRefused(by server: BridgeSettings.Server, _ error: NATSError) {
        counts.authFailed += 1
        rotation.refusedLogin(by: server)
        if counts.authFailed == 1 || rotation.failureIsWorthLogging {
            let login = settings.security.credentials.map { "\($0)" } ?? "no credentials"
            logger.log(
                .natsAuthFailed,
                .error,
                "NATS at \(server) refused the login (\(login)): \(error); local publish and subscribe go on, exports wait in the outbox (\(outbox.count) now); fix the credentials and reload (systemctl reload notifyd-fleet)",
                ["nats_server": "\(server)", "attempts": "\(rotation.failedAttempts)"]
            )
        }
    }

    func drop(_ connection: NATSConnection?, reason: String) {
        stopReads()
        generation += 1
        outbox.resendUnconfirmed()
        if let connection {
            self.connection = nil
            logger.log(.natsDisconnected, .notice, "left NATS: \(reason)")
            Task { await connection.close() }
        }
        connect()
    }

    /// The next server, after a delay that doubles while none answers (``ServerRotation``).
    func scheduleReconnect() {
        let delay = rotation.next()
        let generation = self.generation
        eventLoop.assumeIsolated().scheduleTask(in: delay) { [self] in
            guard generation == self.generation else { return }
            connect()
        }
    }

    // MARK: Reporting

    /// The server of the list being used or tried now.
    var currentServer: BridgeSettings.Server { rotation.current(of: settings.servers) }

    /// Whether a server is connected now, and which.
    var connectedServer: BridgeSettings.Server? {
        connection == nil ? nil : currentServer
    }

    /// The bridge's counters, for `STATS` (PROTOCOL.md lists them).
    var counters: [ServerStats.Counter] {
        [
            .init(name: "nats_connected", value: connection == nil ? 0 : 1),
            .init(name: "nats_server", value: connection == nil ? 0 : UInt64(rotation.position(among: settings.servers.count))),
            .init(name: "nats_connects", value: counts.connects),
            .init(name: "nats_auth_failed", value: counts.authFailed),
            .init(name: "nats_exported", value: outbox.confirmed),
            .init(name: "nats_forwarded", value: counts.forwarded),
            .init(name: "nats_caught_up", value: counts.caughtUp),
            .init(name: "nats_catch_up_lag", value: logReads.catchUpLag),
            .init(name: "nats_catch_up_missed", value: counts.catchUpMissed),
            .init(name: "nats_repairs", value: counts.repairs),
            .init(name: "nats_repaired", value: counts.repaired),
            .init(name: "nats_import_repeated", value: counts.repeats),
            .init(name: "nats_import_held", value: UInt64(sequencer.heldMessages)),
            .init(name: "nats_import_unconfirmed", value: sequencer.unconfirmed + sequencer.discarded),
            .init(name: "nats_log_records_read", value: counts.recordsRead),
            .init(name: "nats_log_refused", value: counts.logRefusals + counts.recordsMalformed + sequencer.implausible),
            .init(name: "nats_log_resent", value: counts.resentRecords),
            // Added to the daemon's own count of refused imports (PROTOCOL.md, "The fleet service").
            .init(name: "nats_import_refused", value: counts.importMalformed),
            .init(name: "nats_import_not_sent", value: link.importsNotSent),
            .init(name: "nats_export_dropped", value: link.exportsDropped),
            .init(name: "nats_outbox_messages", value: UInt64(outbox.count)),
            .init(name: "nats_outbox_bytes", value: UInt64(outbox.bytes)),
            .init(name: "nats_outbox_dropped", value: outbox.dropped),
            .init(name: "nats_export_waited", value: counts.exportsWaitedForRoom),
            .init(name: "nats_too_large", value: counts.tooLarge),
            .init(name: "nats_latest_coalesced", value: latest.coalesced),
        ]
    }

    /// The service's `STATUS=` line.
    package var statusText: String {
        let state = !link.isLinked ? "DAEMON NOT LINKED" : connectedServer.map { "NATS \($0)" } ?? rotation.loginRefused ?? "NATS unreachable"
        var text = "\(state): \(outbox.confirmed) out, \(counts.forwarded) in, outbox \(outbox.count)"
        if outbox.dropped > 0 { text += ", \(outbox.dropped) NOT SENT (outbox full)" }
        if counts.tooLarge > 0 { text += ", \(counts.tooLarge) NOT SENT (over NATS max_payload)" }
        return text
    }
}
