import Logging
import NATSClient
import NIOCore
import NotifyProtocol

/// The import path: other hosts' messages from NATS to the daemon, live (with catch-up on, through the
/// ``OriginSequencer``, which sends gaps to the log), and the fleet's latest messages from their stream.
extension NATSBridge {
    /// Whether live messages are numbered and checked against the log on this connection: catch-up on, and the log
    /// usable.
    var sequencing: Bool { settings.catchUpSeconds > 0 && !logReads.catchUpUnavailable }

    /// Subscribes to other hosts' messages as NATS delivers them. With the log, every exported subject
    /// (`<prefix>.>`), since an origin numbers all it exports and a number not seen must be one lost; what the import
    /// patterns do not select is then counted and let go of here. Without, the import patterns' subjects.
    func subscribeLive(over connection: NATSConnection) {
        let subjectPrefix = settings.prefix + "."
        let subjects = sequencing ? [subjectPrefix + ">"] : settings.imports.map { subjectPrefix + $0.text }
        for subject in subjects {
            connection.subscribe(to: subject) { [weak self] message in
                self?.receiveLive(message, subjectPrefix: subjectPrefix)
            }
        }
    }

    /// A live message: taken in at once when it is the next of its origin (or carries no number), else it waits for
    /// the origin's log.
    func receiveLive(_ message: NATSMessage, subjectPrefix: String) {
        let topic = subjectTopics.topic(of: message.subject, prefix: subjectPrefix)
        guard sequencing else {
            if let topic { forward(message, topic: topic, provenance: forwarder.provenance(of: message), replayed: false, fromStream: false) }
            return
        }
        // Nothing goes to a daemon that is not linked: the log brings it once it is.
        guard link.isLinked else { return }
        let provenance = forwarder.provenance(of: message)
        guard let stamp = provenance.export, let host = provenance.host, host != settings.hostName, forwarder.isValidHostName(host) else {
            if let topic { forward(message, topic: topic, provenance: provenance, replayed: false, fromStream: false) }
            return
        }
        switch sequencer.live(message, host: host, stamp: stamp, logSequence: provenance.logSequence, size: message.payload.readableBytes) {
        case .take, .untracked:
            if let topic { forward(message, topic: topic, provenance: provenance, replayed: false, fromStream: false) }
            schedulePositionSync()
        case .repeated:
            counts.repeats += 1
        case .held(let readFrom):
            if let readFrom { startRead(of: host, after: readFrom) }
        }
    }

    /// Hands a message read from NATS to the daemon. `replayed`: read back from the stream of latest messages (a
    /// message the daemon holds already is a repeat); `fromStream`: read from a stream, where this host's own
    /// messages are too.
    func receive(_ message: NATSMessage, subjectPrefix: String, replayed: Bool, fromStream: Bool? = nil) {
        guard let topic = subjectTopics.topic(of: message.subject, prefix: subjectPrefix) else { return }
        forward(message, topic: topic, provenance: forwarder.provenance(of: message), replayed: replayed, fromStream: fromStream ?? replayed)
    }

    func forward(_ message: NATSMessage, topic: Topic, provenance: Provenance, replayed: Bool, fromStream: Bool) {
        switch forwarder.request(for: message, provenance: provenance, topic: topic, replayed: replayed, limits: link.limits) {
        case .forward(let imported):
            if link.sendImport(imported, unitField: forwarder.unitField(of: imported.delivery.publisher)) { counts.forwarded += 1 }
        case .ownName:
            // Read back from a stream, it is this host's own; live (NATS sends this connection nothing of its
            // own), it is another host's that goes by this one's name.
            if !fromStream { noteSameName() }
        case .refused(let why):
            noteRefused(topic, why)
        }
    }

    func noteSameName() {
        sameNameMessages += 1
        guard sameNameMessages == 1 || sameNameMessages % 10_000 == 0 else { return }
        logger.log(
            .natsProblem,
            .error,
            "another host publishes to NATS as \(settings.hostName), this host's name: its messages are not taken in (\(sameNameMessages) so far); give each host its own --host-name"
        )
    }

    func noteRefused(_ topic: Topic, _ why: String) {
        counts.importMalformed += 1
        if counts.importMalformed == 1 || counts.importMalformed % 1_000 == 0 {
            logger.log(
                .natsProblem,
                .warning,
                "a message from NATS for \(topic) was not taken in: \(why) (\(counts.importMalformed) so far)",
                ["topic": "\(topic)"]
            )
        }
    }

    // MARK: Setting up a connection

    /// The stream that keeps each topic's latest retained message and, with catch-up, the log (each made if
    /// missing); then, with catch-up, what this host missed, read from the log until its end; then, for each import
    /// pattern, the latest messages read into the broker (after catch-up: a topic's latest is then no newer than what
    /// came through the log, so it brings only what the log no longer keeps).
    func readLatest(over connection: NATSConnection, generation: UInt64, attempt: Int = 1) {
        let stream = JetStreamLatest(prefix: settings.prefix, replicas: settings.streamReplicas)
        let log = sequencing ? JetStreamLog(settings: settings) : nil
        let patterns = settings.imports
        let bridge = NIOLoopBound(self, eventLoop: eventLoop)
        let eventLoop = self.eventLoop
        Task {
            var streamFailure: (any Error)?
            var bounds: (first: UInt64, last: UInt64)?
            do {
                if let log {
                    try await log.ensureStream(over: connection)
                    try await log.ensureHeadsStream(over: connection)
                    bounds = try await log.bounds(over: connection)
                    if await log.earlierStreamExists(over: connection) {
                        eventLoop.execute { bridge.value.noteEarlierStream(log) }
                    }
                }
                try await stream.ensureStream(over: connection)
            } catch {
                streamFailure = error
            }
            // Exports waited for this step. Without catch-up they go out made or not (without JetStream all the
            // same); with it, only once the log is there to keep them (a server just restarted may take messages
            // before it has its streams back, and they would be in no log), unless the server has no JetStream.
            let made = streamFailure == nil
            let noJetStream = (streamFailure as? JetStreamError)?.description.contains("not enabled") == true
            eventLoop.execute {
                guard generation == bridge.value.generation else { return }
                if made { bridge.value.streamIsKnown = true }
                if log != nil, noJetStream { bridge.value.withoutCatchUp(over: connection) }
                guard log == nil || made || noJetStream else { return }
                guard !bridge.value.isReady else { return }
                bridge.value.isReady = true
                bridge.value.scheduleSend()
            }
            do {
                if let streamFailure { throw streamFailure }
                if let log, let bounds {
                    let caughtUp = try await eventLoop.submit {
                        bridge.value.startCatchUp(log, bounds: bounds, over: connection, generation: generation)
                    }.get()
                    try await caughtUp.get()
                }
                for pattern in patterns {
                    try await stream.replay(pattern: pattern, over: connection, waiting: { bridge.value.replays.append($0) }) { message in
                        guard generation == bridge.value.generation else { return }
                        bridge.value.receive(message, subjectPrefix: stream.subjectRoot + ".", replayed: true)
                    }
                }
                // Said once the daemon has carried out what was handed to it: then `notify latest` answers with it.
                try? await eventLoop.flatSubmit { bridge.value.link.sync() }.get()
                eventLoop.execute {
                    guard generation == bridge.value.generation else { return }
                    let bridge = bridge.value
                    bridge.logger.log(
                        .natsConnected,
                        .info,
                        "read the latest messages of other hosts from NATS stream \(stream.streamName): \(bridge.counts.forwarded) messages handed to the daemon since start"
                    )
                }
            } catch {
                // A cluster that has just formed, or lost a server, answers "temporarily unavailable", or not at all,
                // until it has a leader: try again, less and less often, while the connection lasts (exports wait in
                // the outbox for the log). Only a log that cannot be made at all (another stream has its subjects)
                // makes this connection go on without catch-up.
                let setUp = bounds != nil
                let cannotBeMade = (error as? JetStreamError)?.code == JetStreamLog.subjectsTaken
                eventLoop.execute {
                    guard generation == bridge.value.generation else { return }
                    if log != nil, !setUp, cannotBeMade {
                        bridge.value.withoutCatchUp(over: connection, because: "the log cannot be used: \(error)")
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

    /// The stream an earlier version read every export from is still there: said once per start, with what to do.
    func noteEarlierStream(_ log: JetStreamLog) {
        guard ownLog.earlierStreamIsWorthLogging() else { return }
        logger.log(
            .natsProblem,
            .warning,
            "NATS stream \(log.earlierStreamName), which earlier versions of notifyd kept every export in, is no longer used (this version reads \(log.streamName) only to repair gaps) and costs the server a write per message: once every host runs this version, remove it (nats stream rm \(log.earlierStreamName))"
        )
    }

    /// Catch-up is on but the server has no JetStream, or the log cannot be made (its subjects taken by another
    /// stream, say): other hosts' messages are read live on this connection, without numbers checked, and said so
    /// once. What waited for the log is taken in as it is.
    func withoutCatchUp(over connection: NATSConnection, because reason: String = "NATS has no JetStream") {
        guard !logReads.catchUpUnavailable else { return }
        let wasSequencing = sequencing
        logReads.catchUpUnavailable = true
        encoder.numbers = false
        link.redeliversLostImports = false
        logger.log(
            .natsProblem,
            .warning,
            "\(reason): no catch-up on this connection (what other hosts publish while this host is away is missed); other hosts' messages are read live"
        )
        stopReads()
        guard wasSequencing else { return }
        // The subscription to every export stays; subjectTopics keeps what the patterns select.
        for message in sequencer.takeEverything() {
            receive(message, subjectPrefix: settings.prefix + ".", replayed: false)
        }
    }
}
