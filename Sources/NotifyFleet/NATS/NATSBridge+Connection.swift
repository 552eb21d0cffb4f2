import Logging
import NATSClient
import NIOCore
import NotifyProtocol

/// A connection's life: made to the server ``ServerRotation`` names, set up (subscriptions, the log, catch-up), kept
/// alive with `PING`s and acknowledgement deadlines, and on its end replaced by one to the next server after a wait.
/// Each connection has its ``NATSBridge/generation``: callbacks of an older one find it changed and do nothing.
extension NATSBridge {
    /// Connects to the current server, off the event loop; `connected` or `connectFailed` follow on it.
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
            ownLog.acknowledgementWaitStarts()
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

    /// Records not acknowledged within ``OwnLog/acknowledgementDeadline`` are sent again on the same connection: a
    /// stream whose leader died answers nothing for them, and other hosts wait for them to fill their gaps.
    func watchAcknowledgements(generation: UInt64) {
        eventLoop.assumeIsolated().scheduleTask(in: .seconds(1)) { [weak self] in
            guard let self, generation == self.generation, connection != nil, sequencing else { return }
            if outbox.hasUnconfirmedSent, ownLog.resendIsDue() {
                counts.resentRecords += 1
                outbox.resendUnconfirmed()
                scheduleSend()
            }
            watchAcknowledgements(generation: generation)
        }
    }

    static let keepAliveInterval = TimeAmount.seconds(10)

    /// A `PING` every ``keepAliveInterval``; a connection that does not answer within another is closed (and so
    /// replaced): a server gone without a word (a partition, a half-open connection) would otherwise look connected
    /// while nothing is confirmed.
    func keepAlive(generation: UInt64) {
        eventLoop.assumeIsolated().scheduleTask(in: Self.keepAliveInterval) { [weak self] in
            guard let self, generation == self.generation, let connection = self.connection else { return }
            // Records sent and not acknowledged for as long: the stream is not storing them (its leader lost, say);
            // another connection sends them again.
            if sequencing, outbox.hasUnconfirmedSent, ownLog.hasWaited(longerThan: Self.keepAliveInterval) {
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
}
