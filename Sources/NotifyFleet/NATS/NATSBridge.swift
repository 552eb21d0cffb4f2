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
///
/// Where things are. The bridge itself, by concern, each an extension in a file of its own:
/// - `NATSBridge.swift`: its state, start, reload (``reconfigure(_:)``), stop, and what `STATS` and `STATUS=` show.
/// - `NATSBridge+Connection.swift`: connecting, keep-alive, a lost server, reconnecting to the next.
/// - `NATSBridge+Export.swift`: the daemon's exports into the ``ExportOutbox``, and the outbox onto the connection.
/// - `NATSBridge+Import.swift`: other hosts' messages, live and from the stream of latest messages, to the daemon.
/// - `NATSBridge+Log.swift`: this host's records in the fleet's log, and reads of it (catch-up, repairs).
///
/// Its state, in values that keep their own books and are tested without a socket (`BridgeState/`):
/// ``ServerRotation`` (which server, how long to wait before it), ``LogReads`` and ``LogRead`` (the reads of the log
/// under way, catch-up's progress), ``PositionKeeper`` (where this host stands, and its state file),
/// ``OwnLog`` (where this host's records and head go, what the head said, the wait for acknowledgements),
/// ``SubjectTopicCache`` (which topic a subject names here), ``BridgeCounts`` (what `STATS` counts). What crosses is
/// shaped in `Crossing/`: ``ExportEncoder``, ``ExportOutbox`` and ``LatestCoalescer`` on the way out,
/// ``ImportForwarder`` and ``OriginSequencer`` on the way in. The bridge wires them together and schedules.
///
/// How a message flows. Out: the daemon's `EXPORT` → ``DaemonLink`` → `export` (the patterns, `max_payload`) → the
/// ``ExportEncoder`` writes it into the ``ExportOutbox`` (a retained one also into the ``LatestCoalescer``) →
/// `scheduleSend` drains the outbox onto the connection in chunks; with catch-up, each chunk is also a record of this
/// host's log, let go of once acknowledged. In: a NATS message → `receiveLive` → the ``SubjectTopicCache`` (a topic
/// this host takes in?) → with catch-up, the ``OriginSequencer`` (the next of its origin is taken; after a gap it is
/// held, and a ``LogRead`` repairs the gap from the log) → the ``ImportForwarder`` → an `IMPORT` to the daemon; once
/// the daemon confirms what it was handed, the ``PositionKeeper`` keeps where this host stands.
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
    /// This host's records in the log and its head: where they go, what the head last said, the wait for
    /// acknowledgements.
    var ownLog: OwnLog
    /// The replays of the latest messages under way on this connection (done ones too, until it ends): failed when it
    /// is let go of, so that none waits for ever.
    var replays: [EventLoopPromise<Void>] = []

    /// How long retained messages of one topic are coalesced into one write to the stream of latest messages.
    static let latestWindow = TimeAmount.milliseconds(5)

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
        self.ownLog = OwnLog(settings: settings)
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
            ownLog.moved(to: newer)
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
