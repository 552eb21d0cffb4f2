import Logging
import NATSClient
import NIOCore
import NotifyProtocol

/// The import path: other hosts' messages from NATS to the daemon, live or through this host's consumer of the
/// stream of exports (catch-up), and the fleet's latest messages from their stream.
extension NATSBridge {
    /// Hands a message read from NATS to the daemon. `replayed`: read back from the stream of latest messages (a
    /// message the daemon holds already is a repeat); `fromStream`: read from a stream, where this host's own
    /// messages are too.
    func receive(_ message: NATSMessage, subjectPrefix: String, replayed: Bool, fromStream: Bool? = nil) {
        guard let topic = importedTopic(of: message.subject, prefix: subjectPrefix) else { return }
        switch forwarder.request(for: message, topic: topic, replayed: replayed, limits: link.limits) {
        case .forward(let imported):
            if link.sendImport(imported, unitField: forwarder.unitField(of: imported.delivery.publisher)) { forwarded += 1 }
        case .ownName:
            // Read back from the stream, it is this host's own; live (NATS sends this connection nothing of its
            // own), it is another host's that goes by this one's name.
            if !(fromStream ?? replayed) { noteSameName() }
        case .refused(let why):
            noteRefused(topic, why)
        }
    }

    /// The topic a subject under `prefix` names, when it is one this host takes in; nil otherwise. Checked once per
    /// distinct subject: a host's messages come under a few subjects again and again, and a topic made and checked
    /// anew for each was a fifth of what taking one in cost (``subjectTopics``, bounded).
    func importedTopic(of subject: String, prefix: String) -> Topic? {
        if let known = subjectTopics[subject] { return known }
        var topic: Topic?
        if subject.utf8.starts(with: prefix.utf8), let name = String(subject.utf8.dropFirst(prefix.utf8.count)),
            let parsed = try? Topic(name), imports.contains(parsed)
        {
            topic = parsed
        }
        if subjectTopics.count >= Self.subjectTopicsLimit { subjectTopics.removeAll(keepingCapacity: true) }
        subjectTopics[subject] = .some(topic)
        return topic
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
        importMalformed += 1
        if importMalformed == 1 || importMalformed % 1_000 == 0 {
            logger.log(
                .natsProblem,
                .warning,
                "a message from NATS for \(topic) was not taken in: \(why) (\(importMalformed) so far)",
                ["topic": "\(topic)"]
            )
        }
    }

    // MARK: Latest across hosts

    /// Subscribes to other hosts' messages as NATS delivers them, without the stream: catch-up off, or no JetStream.
    func subscribeLive(over connection: NATSConnection) {
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
    func readLatest(over connection: NATSConnection, generation: UInt64, attempt: Int = 1) {
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
                // Said once the daemon has carried out what was handed to it: then `notify latest` answers with it.
                try? await eventLoop.flatSubmit { bridge.value.link.sync() }.get()
                eventLoop.execute {
                    guard generation == bridge.value.generation else { return }
                    let bridge = bridge.value
                    bridge.logger.log(
                        .natsConnected,
                        .info,
                        "read the latest messages of other hosts from NATS stream \(stream.streamName): \(bridge.forwarded) messages handed to the daemon since start"
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
    func startCatchUp(
        _ events: JetStreamEvents,
        at position: JetStreamEvents.Position,
        over connection: NATSConnection,
        generation: UInt64
    ) -> EventLoopFuture<Void> {
        if let catchUp { return catchUp.caughtUp.futureResult }  // a retry of the latest messages: it runs already
        if position.missed > 0 { noteMissed(position.missed, in: events) }
        let subjectPrefix = settings.prefix + "."
        let importedBefore = forwarded
        let reader = CatchUpReader(
            connection: connection,
            events: events,
            at: position,
            take: { [weak self] message in
                guard let self, generation == self.generation else { return }
                let before = forwarded
                receive(message, subjectPrefix: subjectPrefix, replayed: false, fromStream: true)
                if catchUp?.isCaughtUp == false { caughtUp += forwarded - before }
            },
            missed: { [weak self] count in
                guard let self, generation == self.generation else { return }
                noteMissed(count, in: events)
            },
            confirmed: { [link] in link.sync() }
        )
        catchUp = reader
        link.redeliversLostImports = true
        reader.caughtUp.futureResult.assumeIsolated().flatMap { [self] in
            // Said once the daemon has carried out what was handed to it.
            link.sync()
        }.whenSuccess { [weak self] in
            guard let self, generation == self.generation else { return }
            logger.log(
                .natsConnected,
                .notice,
                "caught up with NATS stream \(events.streamName) as consumer \(events.consumerName)\(position.isNew ? " (new)" : ""): \(forwarded - importedBefore) messages of other hosts handed to the daemon"
            )
        }
        reader.start()
        return reader.caughtUp.futureResult
    }

    /// Messages of the stream of exports gone before this host read them: its subscribers are told (a `DROP`), the
    /// journal says so, and `nats_catch_up_missed` counts them.
    func noteMissed(_ count: UInt64, in events: JetStreamEvents) {
        let (sum, overflow) = catchUpMissed.addingReportingOverflow(count)
        catchUpMissed = overflow ? .max : sum
        link.send(Request(.announceMissed(count)))
        logger.log(
            .natsProblem,
            .warning,
            "\(count) messages of NATS stream \(events.streamName) were gone before this host read them (older than catch-up = \(settings.catchUpSeconds) s, or past catch-up-bytes): this host's subscribers were told of the drop",
            ["dropped": "\(count)"]
        )
    }

    /// Catch-up is on but the server has no JetStream, or the stream of exports cannot be made (its subjects taken by
    /// another stream, say): other hosts' messages are read live on this connection, and said so once.
    func withoutCatchUp(over connection: NATSConnection, because reason: String = "NATS has no JetStream") {
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
    func stopCatchUp() {
        link.redeliversLostImports = false
        if let catchUp { lastCatchUpLag = catchUp.lag }
        catchUp?.stop()
        catchUp = nil
        let stopped = replays
        replays.removeAll()
        for replay in stopped { replay.fail(NATSError("the connection was let go of")) }
    }
}
