import Logging
import NATSClient
import NotifyFederation
import NIOCore
import NotifyBus

/// The daemon's link to a NATS cluster: local publishes go out as NATS messages, other hosts' come in as local
/// publishes stamped with their origin (README, "Several hosts").
///
/// It lives on the broker's event loop, like everything the broker touches, and its NATS connection runs on the same
/// loop, so a publish reaches the connection's buffer without a hop between threads. It never makes a local publish
/// wait: what NATS cannot take now waits in the bounded ``ExportOutbox``, and a lost server only means reconnecting,
/// with backoff, to the next one of the list.
///
/// Subjects: `<prefix>.<topic>` for every message; a retained one also goes to `<prefix>-latest.<topic>`, which a
/// JetStream stream (`<prefix>_latest`, one message per subject, as NATS's key-value buckets keep them) holds, so a
/// host that connects later reads the fleet's latest message of each topic.
final class NATSBridge {
    private let broker: Broker
    private let eventLoop: any EventLoop
    private let logger: Logger
    private(set) var settings: BridgeSettings
    private let importer: Session
    /// Whom exports are read as: `nobody`, as imports are published. A topic goes to other hosts only if nobody may
    /// read it here, since any client of the NATS server can read what is exported.
    private let exportReader: PeerCredentials
    /// Exports refused by the access rules (not readable by nobody).
    private(set) var notReadable: UInt64 = 0
    private var outbox: ExportOutbox
    private var encoder: ExportEncoder
    private var exports: FederatedTopics
    private var imports: FederatedTopics
    private var connection: NATSConnection?
    /// The server of ``connection``, or the one being tried.
    private var serverIndex = 0
    /// Bumped whenever a connection ends or the settings change, so that callbacks of an older one do nothing.
    private var generation: UInt64 = 0
    private var retryDelay = NATSBridge.firstRetryDelay
    private var isStopped = false
    /// Whether exports may go out on the connection: once the stream of latest messages was made (or could not be),
    /// so that the retained messages they carry find it.
    private var isReady = false
    /// Whether the stream of latest messages was made or found once (on any connection of the same settings).
    private var streamIsKnown = false
    private var connectedAt = NIODeadline.now()
    private var sendIsScheduled = false
    private var brokerFlushIsScheduled = false
    /// Failed connection attempts since the last success, to log the first of a run and not every one.
    private var failedAttempts = 0
    private var overflowReported: UInt64 = 0
    /// What is taken in, and how: a message sent again after a reconnect, or read again from the stream, is not
    /// published twice, and a claim this host does not accept is refused.
    private var importPath: ImportPath

    /// The largest message (headers and payload) the server takes, from its `INFO`; NATS's default until one is read.
    private var serverMaxPayload = 1 << 20
    /// Messages not exported because they were over `serverMaxPayload`.
    private(set) var tooLarge: UInt64 = 0
    private var sameNameMessages: UInt64 = 0
    private(set) var imported: UInt64 = 0
    /// Other hosts' `CLEAR`s taken in (applied, or outdated by a newer message here).
    private(set) var clearsTakenIn: UInt64 = 0
    /// This connection's reader of the stream of exports, with catch-up on (``CatchUpReader``).
    private var catchUp: CatchUpReader?
    /// Messages taken in from the stream of exports before it reached the present: what was missed while away.
    private(set) var caughtUp: UInt64 = 0
    /// Messages the stream no longer kept when this host came back: announced to its subscribers as dropped.
    private(set) var catchUpMissed: UInt64 = 0
    /// The replays of the latest messages under way on this connection (done ones too, until it ends): failed when it
    /// is let go of, so that none waits for ever.
    private var replays: [EventLoopPromise<Void>] = []
    /// Whether catch-up is on but the server has no JetStream: imports are read live, and what is missed is missed.
    private var catchUpUnavailable = false
    private(set) var importRefused: UInt64 = 0
    private(set) var connects: UInt64 = 0
    /// Logins a server refused, and the last refusal's sentence while no login has succeeded since.
    private(set) var authFailed: UInt64 = 0
    private var loginRefused: String?

    static let firstRetryDelay = TimeAmount.milliseconds(100)
    static let keepAliveInterval = TimeAmount.seconds(10)
    /// A connection that lasted less than this did not end the run of failures: the backoff goes on growing (a
    /// server that takes connections and drops them must not be hammered).
    static let stableConnection = TimeAmount.seconds(10)
    static let longestRetryDelay = TimeAmount.seconds(5)

    /// Made on the event loop; call ``start()`` there.
    init(settings: BridgeSettings, broker: Broker, peer: PeerCredentials, eventLoop: any EventLoop, logger: Logger) {
        self.settings = settings
        self.broker = broker
        self.eventLoop = eventLoop
        self.logger = logger
        self.importer = broker.openImporter(peer: peer)
        self.exportReader = peer
        self.importPath = ImportPath(hostName: settings.hostName)
        self.outbox = ExportOutbox(limit: settings.outboxBytes)
        self.encoder = ExportEncoder(prefix: settings.prefix, hostName: settings.hostName)
        self.exports = FederatedTopics(settings.exports)
        self.imports = FederatedTopics(settings.imports)
    }

    /// Starts exporting and connecting.
    func start() {
        broker.exporter = { [unowned self] message in export(message) }
        broker.extraCounters = { [unowned self] in counters }
        connect()
    }

    /// Applies new settings (SIGHUP). Another server list, prefix or import list means a new connection; what waits in
    /// the outbox is kept.
    func reconfigure(_ newer: BridgeSettings) {
        let reconnects = newer.servers != settings.servers || newer.prefix != settings.prefix || newer.imports != settings.imports
            || newer.hostName != settings.hostName || newer.security != settings.security
            || newer.catchUpSeconds != settings.catchUpSeconds || newer.catchUpBytes != settings.catchUpBytes
        settings = newer
        outbox.limit = newer.outboxBytes
        encoder = ExportEncoder(prefix: newer.prefix, hostName: newer.hostName)
        exports = FederatedTopics(newer.exports)
        imports = FederatedTopics(newer.imports)
        if reconnects {
            serverIndex = 0
            streamIsKnown = false
            importPath.hostName = newer.hostName
            importPath.forgetTaken()
            drop(connection, reason: "its settings changed")
        }
    }

    /// Stops: sends what the outbox holds if a server takes it within `grace`, then closes. Returns how many
    /// messages were never confirmed.
    func stop(grace: TimeAmount) -> EventLoopFuture<Int> {
        broker.exporter = nil
        broker.extraCounters = nil
        broker.close(importer)
        stopCatchUp()
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
        return confirmed.futureResult.assumeIsolated().map { [self] in
            deadline.cancel()
            outbox.confirm(through: mark)
            return outbox.count
        }.recover { _ in self.outbox.count }.always { [self] unsent in
            self.connection = nil
            logger.log(.natsDisconnected, .notice, "left NATS (the link is stopped); \((try? unsent.get()) ?? 0) messages were not confirmed")
            Task { await connection.close() }
        }.nonisolated()
    }

    // MARK: Connecting

    private func connect() {
        guard !isStopped else { return }
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

    private func connected(_ connection: NATSConnection, to server: BridgeSettings.Server, generation: UInt64) {
        guard generation == self.generation, !isStopped else {
            Task { await connection.close() }
            return
        }
        self.connection = connection
        serverMaxPayload = JSONScan.integer("max_payload", in: connection.serverInfo).map { max(1, $0) } ?? serverMaxPayload
        connects += 1
        failedAttempts = 0
        loginRefused = nil
        catchUpUnavailable = false
        connectedAt = .now()
        // Only until the stream is known to exist: later connections need not wait for JetStream to answer, but
        // with catch-up each waits until the stream of exports is there to keep what it sends.
        isReady = streamIsKnown && settings.catchUpSeconds == 0
        // Weakly: a connection being closed may call back after a reload has let go of the bridge.
        connection.setOnClosed { [weak self] error in self?.disconnected(error, generation: generation) }
        connection.setOnWritable { [weak self] in self?.scheduleSend() }
        // With catch-up, other hosts' messages come through this host's consumer of the stream (readLatest).
        if settings.catchUpSeconds == 0 { subscribeLive(over: connection) }
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

    /// A `PING` every ``keepAliveInterval``; a connection that does not answer within another is closed (and so
    /// replaced): a server gone without a word (a partition, a half-open connection) would otherwise look connected
    /// while nothing is confirmed.
    private func keepAlive(generation: UInt64) {
        eventLoop.assumeIsolated().scheduleTask(in: Self.keepAliveInterval) { [weak self] in
            guard let self, generation == self.generation, let connection = self.connection else { return }
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

    private func connectFailed(_ server: BridgeSettings.Server, error: any Error, generation: UInt64) {
        guard generation == self.generation, !isStopped else { return }
        failedAttempts += 1
        if let refusal = error as? NATSError, refusal.isAuthorizationFailure {
            loginRefused(by: server, refusal)
        } else if failedAttempts == 1 || failedAttempts % 100 == 0 {
            let text = "\(error)"
            // What the packaged unit's hardening answers: say what to do about it rather than let it look like an outage.
            let hint = ["Address family not supported", "Operation not permitted", "Network is unreachable"].contains { text.contains($0) }
                ? " (under systemd, notifyd.service keeps the daemon off the network: install the drop-in nats-network.conf from /usr/share/doc/notifyd/examples)"
                : ""
            logger.log(
                .natsDisconnected,
                .warning,
                "cannot reach NATS at \(server) (\(text))\(hint); local publish and subscribe go on, exports wait in the outbox (\(outbox.count) now), trying the servers again",
                ["nats_server": "\(server)", "attempts": "\(failedAttempts)"]
            )
        }
        scheduleReconnect()
    }

    private func disconnected(_ error: NATSError, generation: UInt64) {
        guard generation == self.generation else { return }
        let server = currentServer
        stopCatchUp()
        connection = nil
        self.generation += 1
        outbox.resendUnconfirmed()
        if NIODeadline.now() - connectedAt >= Self.stableConnection { retryDelay = Self.firstRetryDelay }
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
    private func loginRefused(by server: BridgeSettings.Server, _ error: NATSError) {
        authFailed += 1
        loginRefused = "NATS LOGIN REFUSED by \(server)"
        if authFailed == 1 || failedAttempts <= 1 || failedAttempts % 100 == 0 {
            let login = settings.security.credentials.map { "\($0)" } ?? "no credentials"
            logger.log(
                .natsAuthFailed,
                .error,
                "NATS at \(server) refused the login (\(login)): \(error); local publish and subscribe go on, exports wait in the outbox (\(outbox.count) now); fix the credentials and reload (systemctl reload notifyd)",
                ["nats_server": "\(server)", "attempts": "\(failedAttempts)"]
            )
        }
    }

    private func drop(_ connection: NATSConnection?, reason: String) {
        stopCatchUp()
        generation += 1
        outbox.resendUnconfirmed()
        if let connection {
            self.connection = nil
            logger.log(.natsDisconnected, .notice, "left NATS: \(reason)")
            Task { await connection.close() }
        }
        connect()
    }

    /// The next server, after a delay that doubles up to ``longestRetryDelay`` while none answers.
    private func scheduleReconnect() {
        serverIndex += 1
        let delay = retryDelay
        retryDelay = min(retryDelay * 2, Self.longestRetryDelay)
        let generation = self.generation
        eventLoop.assumeIsolated().scheduleTask(in: delay) { [self] in
            guard generation == self.generation else { return }
            connect()
        }
    }

    // MARK: Export

    private func export(_ message: ExportedMessage) {
        let topic = message.topic
        // Every client of the NATS server reads what is exported: only what nobody may read here goes (a rule that
        // lets user:nobody read a topic exports it).
        switch exports.exportDecision(for: topic, policy: broker.configuration.accessPolicy, reader: exportReader) {
        case .export: break
        case .notSelected: return
        case .notReadable:
            notReadable += 1
            return
        }
        // A message over the server's max_payload would make it close the connection, again at every resend.
        let size = encoder.prepare(message)
        guard size <= serverMaxPayload else {
            tooLarge += 1
            if tooLarge == 1 || tooLarge % 1_000 == 0 {
                logger.log(
                    .natsOutboxOverflow,
                    .error,
                    "a message of \(topic) is not sent to other hosts: with its headers it is \(size) bytes, over the NATS server's max_payload (\(serverMaxPayload)); \(tooLarge) so far",
                    ["topic": "\(topic)"]
                )
            }
            return
        }
        guard outbox.append(uid: message.publisher.uid, encode: { encoder.writePrepared(message, into: &$0) }) else {
            reportOverflow(uid: message.publisher.uid)
            return
        }
        if connection != nil { scheduleSend() }
    }

    /// Sends what waits once the current batch of work is done: the batch's exports go out as one chunk, one write and
    /// one flush, not one per message.
    private func scheduleSend() {
        guard !sendIsScheduled else { return }
        sendIsScheduled = true
        eventLoop.assumeIsolated().execute { [self] in
            sendIsScheduled = false
            guard drain(), let connection else { return }
            let mark = outbox.sentThrough
            let generation = self.generation
            let confirmed = eventLoop.makePromise(of: Void.self)
            connection.flush(confirmed: confirmed)
            confirmed.futureResult.assumeIsolated().whenSuccess { [self] in
                guard generation == self.generation else { return }
                outbox.confirm(through: mark)
            }
        }
    }

    /// Writes what waits while the connection takes it (without flushing); returns whether it wrote anything.
    @discardableResult
    private func drain() -> Bool {
        guard let connection, isReady else { return false }
        var wrote = false
        while connection.isWritable, let message = outbox.nextUnsent() {
            connection.write(message)
            wrote = true
        }
        return wrote
    }

    private func reportOverflow(uid: UInt32) {
        // Once per 1,000 at most after the first: an outage under load must not flood the journal.
        let dropped = outbox.dropped
        guard dropped == 1 || dropped - overflowReported >= 1_000 else { return }
        overflowReported = dropped
        let full = outbox.lastRefusalWasShare
            ? "the NATS outbox is full for uid \(uid) (its messages hold their share of the outbox's \(outbox.limit) bytes)"
            : "the NATS outbox is full (\(outbox.bytes) of \(outbox.limit) bytes)"
        logger.log(
            .natsOutboxOverflow,
            .error,
            "\(full): \(dropped) messages not sent to other hosts so far, \(outbox.droppedOverShare) of them over their uid's share",
            ["dropped": "\(dropped)", "uid": "\(uid)"]
        )
    }

    // MARK: Import

    /// Takes in a message read from NATS. `replayed`: read back from the stream of latest messages (a message the
    /// broker holds already is a repeat); `fromStream`: read from a stream, where this host's own messages are too.
    private func receive(_ message: NATSMessage, subjectPrefix: String, replayed: Bool, fromStream: Bool? = nil) {
        guard message.subject.utf8.starts(with: subjectPrefix.utf8),
            let topic = try? Topic(String(message.subject.utf8.dropFirst(subjectPrefix.utf8.count))!)
        else { return }
        guard imports.contains(topic) else { return }
        let now = PublishTime.now().microsecondsSinceEpoch
        switch importPath.take(message, topic: topic, replayed: replayed, into: broker, through: importer, now: now) {
        case .published: imported += 1
        case .cleared: clearsTakenIn += 1
        case .repeated: return
        case .ownName:
            // Read back from the stream, it is this host's own; live (NATS sends this connection nothing of its
            // own), it is another host's that goes by this one's name.
            if !(fromStream ?? replayed) { noteSameName() }
            return
        case .refused(let why): return noteRefused(topic, why)
        }
        guard !brokerFlushIsScheduled else { return }
        brokerFlushIsScheduled = true
        eventLoop.assumeIsolated().execute { [self] in
            brokerFlushIsScheduled = false
            broker.flush()
        }
    }

    private func noteSameName() {
        sameNameMessages += 1
        guard sameNameMessages == 1 || sameNameMessages % 10_000 == 0 else { return }
        logger.log(
            .natsProblem,
            .error,
            "another host publishes to NATS as \(settings.hostName), this host's name: its messages are not taken in (\(sameNameMessages) so far); give each host its own --host-name"
        )
    }

    private func noteRefused(_ topic: Topic, _ why: String) {
        importRefused += 1
        if importRefused == 1 || importRefused % 1_000 == 0 {
            logger.log(
                .natsProblem,
                .warning,
                "a message from NATS for \(topic) was not taken in: \(why) (\(importRefused) so far)",
                ["topic": "\(topic)"]
            )
        }
    }

    // MARK: Latest across hosts

    /// Subscribes to other hosts' messages as NATS delivers them, without the stream: catch-up off, or no JetStream.
    private func subscribeLive(over connection: NATSConnection) {
        let subjectPrefix = settings.prefix + "."
        for pattern in settings.imports {
            connection.subscribe(to: subjectPrefix + pattern.text) { [weak self] message in
                self?.receive(message, subjectPrefix: subjectPrefix, replayed: false)
            }
        }
    }

    /// The stream that keeps each topic's latest retained message and, with catch-up, the stream of exports (each
    /// made if missing); then, with catch-up, what this host missed, read from its consumer until the present; then,
    /// for each import pattern, the latest messages read into the broker (after catch-up: a topic's latest is then
    /// no newer than what came through the consumer, so it brings only what the stream of exports no longer keeps).
    private func readLatest(over connection: NATSConnection, generation: UInt64, attempt: Int = 1) {
        let stream = JetStreamLatest(prefix: settings.prefix, replicas: settings.streamReplicas)
        let events = settings.catchUpSeconds > 0 && !catchUpUnavailable ? JetStreamEvents(settings: settings) : nil
        let patterns = settings.imports
        let bridge = NIOLoopBound(self, eventLoop: eventLoop)
        let eventLoop = self.eventLoop
        Task {
            var streamFailure: (any Error)?
            var position: JetStreamEvents.Position?
            do {
                try await stream.ensureStream(over: connection)
                if let events {
                    try await events.ensureStream(over: connection)
                    position = try await events.ensureConsumer(over: connection)
                }
            } catch {
                streamFailure = error
            }
            // Exports waited for this step. Without catch-up they go out made or not (without JetStream all the
            // same); with it, only into the stream of exports (a server just restarted may take messages before it
            // has its streams back, and they would be in no stream), unless the server has no JetStream at all.
            let made = streamFailure == nil
            let noJetStream = (streamFailure as? JetStreamError)?.description.contains("not enabled") == true
            eventLoop.execute {
                guard generation == bridge.value.generation else { return }
                if made { bridge.value.streamIsKnown = true }
                if events != nil, noJetStream { bridge.value.withoutCatchUp(over: connection) }
                guard events == nil || made || noJetStream else { return }
                guard !bridge.value.isReady else { return }
                bridge.value.isReady = true
                bridge.value.scheduleSend()
            }
            do {
                if let streamFailure { throw streamFailure }
                if let events, let position {
                    let caughtUp = try await eventLoop.submit {
                        bridge.value.startCatchUp(events, at: position, over: connection, generation: generation)
                    }.get()
                    try await caughtUp.get()
                }
                for pattern in patterns {
                    try await stream.replay(pattern: pattern, over: connection, waiting: { bridge.value.replays.append($0) }) { message in
                        guard generation == bridge.value.generation else { return }
                        bridge.value.receive(message, subjectPrefix: stream.subjectRoot + ".", replayed: true)
                    }
                }
                eventLoop.execute {
                    guard generation == bridge.value.generation else { return }
                    let bridge = bridge.value
                    bridge.logger.log(
                        .natsConnected,
                        .info,
                        "read the latest messages of other hosts from NATS stream \(stream.streamName): \(bridge.imported) messages taken in since start"
                    )
                }
            } catch {
                // A cluster that has just formed answers "temporarily unavailable" until it has a leader: try again,
                // less and less often, while the connection lasts. Exports wait for the stream of exports for three
                // tries (7 s); then this connection goes on without catch-up, rather than hold them longer.
                let setUp = position != nil
                eventLoop.execute {
                    guard generation == bridge.value.generation else { return }
                    if events != nil, !setUp, attempt >= 3 {
                        bridge.value.withoutCatchUp(over: connection, because: "the stream of exports cannot be used: \(error)")
                        if !bridge.value.isReady {
                            bridge.value.isReady = true
                            bridge.value.scheduleSend()
                        }
                    }
                    bridge.value.logger.log(
                        .natsProblem,
                        attempt == 1 ? .warning : .debug,
                        "the latest messages of other hosts could not be read from NATS (attempt \(attempt)), trying again: \(error)"
                    )
                    let delay = TimeAmount.seconds(Int64(min(1 << min(attempt - 1, 5), 30)))
                    eventLoop.assumeIsolated().scheduleTask(in: delay) {
                        guard generation == bridge.value.generation else { return }
                        bridge.value.readLatest(over: connection, generation: generation, attempt: attempt + 1)
                    }
                }
            }
        }
    }

    // MARK: Catch-up

    /// Starts reading this host's consumer of the stream of exports; returns when it will have reached the present.
    private func startCatchUp(
        _ events: JetStreamEvents,
        at position: JetStreamEvents.Position,
        over connection: NATSConnection,
        generation: UInt64
    ) -> EventLoopFuture<Void> {
        if let catchUp { return catchUp.caughtUp.futureResult }  // a retry of the latest messages: it runs already
        if position.missed > 0 { noteMissed(position.missed, in: events) }
        let subjectPrefix = settings.prefix + "."
        let importedBefore = imported
        let reader = CatchUpReader(
            connection: connection,
            events: events,
            at: position,
            take: { [weak self] message in
                guard let self, generation == self.generation else { return }
                let before = imported
                receive(message, subjectPrefix: subjectPrefix, replayed: false, fromStream: true)
                if catchUp?.isCaughtUp == false { caughtUp += imported - before }
            },
            missed: { [weak self] count in
                guard let self, generation == self.generation else { return }
                noteMissed(count, in: events)
            }
        )
        catchUp = reader
        reader.caughtUp.futureResult.assumeIsolated().whenSuccess { [weak self] in
            guard let self, generation == self.generation else { return }
            logger.log(
                .natsConnected,
                .notice,
                "caught up with NATS stream \(events.streamName) as consumer \(events.consumerName)\(position.isNew ? " (new)" : ""): \(imported - importedBefore) messages of other hosts taken in"
            )
        }
        reader.start()
        return reader.caughtUp.futureResult
    }

    /// Messages of the stream of exports gone before this host read them: its subscribers are told (a `DROP`), the
    /// journal says so, and `nats_catch_up_missed` counts them.
    private func noteMissed(_ count: UInt64, in events: JetStreamEvents) {
        catchUpMissed += count
        broker.announceMissedImports(count: count)
        broker.flush()
        logger.log(
            .natsProblem,
            .warning,
            "\(count) messages of NATS stream \(events.streamName) were gone before this host read them (older than catch-up = \(settings.catchUpSeconds) s, or past catch-up-bytes): this host's subscribers were told of the drop",
            ["dropped": "\(count)"]
        )
    }

    /// Catch-up is on but the server has no JetStream, or the stream of exports cannot be made (its subjects taken by
    /// another stream, say): other hosts' messages are read live on this connection, and said so once.
    private func withoutCatchUp(over connection: NATSConnection, because reason: String = "NATS has no JetStream") {
        guard !catchUpUnavailable else { return }
        catchUpUnavailable = true
        logger.log(
            .natsProblem,
            .warning,
            "\(reason): no catch-up on this connection (what other hosts publish while this host is away is missed); other hosts' messages are read live"
        )
        subscribeLive(over: connection)
    }

    /// Lets go of the connection's reader of the stream, acknowledging what it took in, and of the replays of the
    /// latest messages under way on it.
    private func stopCatchUp() {
        catchUp?.stop()
        catchUp = nil
        let stopped = replays
        replays.removeAll()
        for replay in stopped { replay.fail(NATSError("the connection was let go of")) }
    }

    // MARK: Reporting

    /// The server of the list being used or tried now.
    private var currentServer: BridgeSettings.Server { settings.servers[serverIndex % settings.servers.count] }

    /// Whether a server is connected now, and which.
    var connectedServer: BridgeSettings.Server? {
        connection == nil ? nil : currentServer
    }

    /// The bridge's counters, for `STATS` (PROTOCOL.md lists them).
    var counters: [ServerStats.Counter] {
        [
            .init(name: "nats_connected", value: connection == nil ? 0 : 1),
            .init(name: "nats_server", value: connection == nil ? 0 : UInt64(serverIndex % settings.servers.count + 1)),
            .init(name: "nats_connects", value: connects),
            .init(name: "nats_auth_failed", value: authFailed),
            .init(name: "nats_exported", value: outbox.confirmed),
            .init(name: "nats_imported", value: imported),
            .init(name: "nats_clears_imported", value: clearsTakenIn),
            .init(name: "nats_caught_up", value: caughtUp),
            .init(name: "nats_catch_up_lag", value: catchUp?.lag ?? 0),
            .init(name: "nats_catch_up_missed", value: catchUpMissed),
            .init(name: "nats_import_refused", value: importRefused),
            .init(name: "nats_import_repeats", value: importPath.filter.repeats),
            .init(name: "nats_outbox_messages", value: UInt64(outbox.count)),
            .init(name: "nats_outbox_bytes", value: UInt64(outbox.bytes)),
            .init(name: "nats_outbox_dropped", value: outbox.dropped),
            .init(name: "nats_too_large", value: tooLarge),
            .init(name: "nats_not_exported", value: notReadable),
        ]
    }

    /// The bridge's part of the `STATUS=` line.
    var statusText: String {
        let state = connectedServer.map { "NATS \($0)" } ?? loginRefused ?? "NATS unreachable"
        var text = "\(state): \(outbox.confirmed) out, \(imported) in, outbox \(outbox.count)"
        if outbox.dropped > 0 { text += ", \(outbox.dropped) NOT SENT (outbox full)" }
        if tooLarge > 0 { text += ", \(tooLarge) NOT SENT (over NATS max_payload)" }
        return text
    }
}
