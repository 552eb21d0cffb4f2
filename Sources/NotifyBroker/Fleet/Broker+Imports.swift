public import NIOCore
public import NotifyProtocol

/// A message another host published, to be published here (``Broker/publishImported(_:through:)``).
public struct ImportedMessage: Sendable {
    /// The topic it was published to.
    public var topic: Topic
    /// The bytes published.
    public var payload: ByteBuffer
    /// Whether it becomes the topic's buffered message here too.
    public var retain: Bool
    /// The host it was published on: a name of ``ImportedMessage/isValidHostName(_:)``.
    public var host: String
    /// Who published it there.
    public var publisher: Publisher
    /// Its sequence number in the topic on its host: the topic here takes it when it is past its own.
    public var sequence: UInt64

    /// Creates an imported message.
    public init(topic: Topic, payload: ByteBuffer, retain: Bool, host: String, publisher: Publisher, sequence: UInt64) {
        self.topic = topic
        self.payload = payload
        self.retain = retain
        self.host = host
        self.publisher = publisher
        self.sequence = sequence
    }

    /// Whether `name` can name a host in a delivery (``FleetImport/isValidHostName(_:)``).
    public static func isValidHostName(_ name: String) -> Bool { FleetImport.isValidHostName(name) }

    /// Whether `name` can be a publisher's unit in another host's message (``FleetImport/isValidUnitName(_:)``).
    public static func isValidUnitName(_ name: String) -> Bool { FleetImport.isValidUnitName(name) }

    /// The largest sequence number an imported message may give its topic here: half the state log's largest
    /// (``StateLog/largestSequence``), so that local publishes can number on from any imported number for longer
    /// than any topic lives, and every number stays one the log reads back.
    public static let largestSequence = StateLog.largestSequence / 2

    /// The uid that other hosts' messages are charged to here (their buffered messages, their history): nobody's,
    /// whatever uid their provenance claims, running or restored from the state log.
    public static let importerUID: UInt32 = 65534

    /// The publisher's unit as this host keeps it: nil unless it is a unit name (``isValidUnitName(_:)``).
    var validUnit: String? {
        publisher.unit.flatMap { Self.isValidUnitName($0) ? $0 : nil }
    }

    /// The unit field of its deliveries here: the origin host, a `/`, then the publisher's unit or `-`
    /// (PROTOCOL.md, "Deliveries").
    var unitField: String {
        host + "/" + (validUnit ?? "-")
    }

    /// Why this host does not take the message in, whatever its access rules say: the checks a local publish
    /// meets in the request decoder (payload and topic size), and those on what only a peer can claim (its host,
    /// its sequence number). Nil when none applies.
    func refusal(under limits: ProtocolLimits) -> ProtocolError? {
        if !Self.isValidHostName(host) {
            return ProtocolError(.malformed, "its origin host is not a host name (1 to 64 letters, digits, '.', '-', '_')")
        }
        if sequence > Self.largestSequence {
            return ProtocolError(.malformed, "its sequence number \(sequence) is past the largest this host takes in (\(Self.largestSequence))")
        }
        if payload.readableBytes > limits.maxPayload {
            return ProtocolError(.payloadTooLarge, "its \(payload.readableBytes)-byte payload is over this daemon's max-payload (\(limits.maxPayload))")
        }
        if topic.name.utf8.count > limits.maxTopic {
            return ProtocolError(.invalidTopic, "its topic is \(topic.name.utf8.count) bytes, over this daemon's max-topic-length (\(limits.maxTopic))")
        }
        return nil
    }
}

/// What became of an imported message.
public enum ImportOutcome: Sendable, Equatable {
    /// Published here with this sequence number.
    case published(sequence: UInt64)
    /// Refused, as a local publish would have been (access rules, limits); the error says why.
    case refused(ProtocolError)
}

/// Other hosts' messages taken in: the fleet service (notifyd-fleet, a client over protocol 5) hands them to the
/// broker through an importer session (`IMPORT`), and the broker takes them in as if published here, stamped with
/// their origin. What goes out to other hosts is the follower's (`FOLLOW`, Broker+Fleet.swift).
extension Broker {
    /// Opens the session that carries in other hosts' messages, with the daemon's own credentials `peer`: access
    /// rules and per-user limits apply to it as to that user's connections. Its publishes are never exported.
    public func openImporter(peer: PeerCredentials) -> Session {
        let session = open(peer: peer, transport: DiscardingTransport())
        session.markImporter()
        session.receivesOwnMessages = false
        return session
    }

    /// Publishes `message` here, through `importer` (from ``openImporter(peer:)``): local subscribers, `LATEST`,
    /// history and the state log treat it as any message; its deliveries name its origin host.
    public func publishImported(_ message: ImportedMessage, through importer: Session) -> ImportOutcome {
        precondition(importer.isImporter, "publishImported needs the session of openImporter(peer:)")
        if let refusal = message.refusal(under: configuration.protocolLimits) { return .refused(refusal) }
        let before = counters.messagesIn
        // The unit field of consecutive imports is usually the same text: made once, not per message.
        if fleet.lastImportUnit?.host != message.host || fleet.lastImportUnit?.unit != message.publisher.unit {
            fleet.lastImportUnit = (message.host, message.publisher.unit, message.unitField)
        }
        // Set only when it changes: setting it makes the session's unit field again, which a run of one publisher's
        // messages need not pay for each.
        let publisher = Publisher(uid: message.publisher.uid, pid: message.publisher.pid, unit: fleet.lastImportUnit!.field)
        if importer.publisher != publisher { importer.publisher = publisher }
        importer.minimumSequence = message.sequence
        defer { importer.minimumSequence = 0 }
        fleet.lastImportRefusal = nil
        message.payload.withUnsafeReadableBytes {
            publish(message.topic, payload: $0, options: PublishOptions(retain: message.retain), id: nil, from: importer)
        }
        // Accepted, the topic is the importer's last (``Session/lastPublishedTopic``): no second lookup.
        guard counters.messagesIn != before, let sequence = importer.lastPublishedTopic?.sequence else {
            return .refused(fleet.lastImportRefusal ?? ProtocolError(.limitReached, "the daemon refused it"))
        }
        return .published(sequence: sequence)
    }

    /// Clears `topic`'s buffered message here as another host's `CLEAR` at `time` (its clock, microseconds since
    /// the epoch) asks, through `importer`: refused as a local clear by user `nobody` would be (access rules).
    ///
    /// Which of a message and a clear came last: NATS's order on the topic's subject, for a clear read live and a
    /// message another host published (a message published after the clear would come after it); the times, for
    /// a message of this host's own (it reached NATS on its own way) and for a clear read back from the stream of
    /// latest messages (`replayed`), which may be older than a message taken in live meanwhile. A message that the
    /// times say is newer stays. Returns why it was refused, or nil.
    public func clearImported(_ topic: Topic, at time: UInt64, replayed: Bool, through importer: Session) -> ProtocolError? {
        precondition(importer.isImporter, "clearImported needs the session of openImporter(peer:)")
        if let denial = denial(.publish, of: topic, to: importer, id: nil) { return denial }
        guard let state = topicTable[topic.name], let retained = retained(of: state) else { return nil }
        var frame = retained.frame
        var decoder = ServerFrameDecoder(maxPayload: max(frame.readableBytes, 1))
        if case .delivery(let held)? = try? decoder.decode(buffer: &frame), replayed || held.publisher.host == nil,
            held.time.microsecondsSinceEpoch > time
        {
            return nil
        }
        dropRetained(of: state, by: importer)
        return nil
    }

    /// The newest message of `topic` here (in its history, or buffered) when another host published it: that host,
    /// its number here and when it was taken in (microseconds since the epoch). What a bridge that starts again
    /// knows of what it took in before, so that a message sent to it again is not taken in twice.
    public func newestImported(of topic: Topic) -> (host: String, sequence: UInt64, time: UInt64)? {
        guard let state = topicTable[topic.name] else { return nil }
        settleHistory()
        var newest: ByteBuffer?
        var newestSequence: UInt64 = 0
        if let history = state.history, let sequence = history.newestSequence, let entry = history.entry(sequence: sequence) {
            var frame = ByteBuffer()
            history.writeFrame(of: entry, topic: topic.name, into: &frame)
            (newest, newestSequence) = (frame, sequence)
        }
        if let retained = retained(of: state), retained.sequence > newestSequence {
            newest = retained.frame
        }
        guard var frame = newest else { return nil }
        var decoder = ServerFrameDecoder(maxPayload: max(frame.readableBytes, 1))
        guard case .delivery(let held)? = try? decoder.decode(buffer: &frame), let host = held.host else { return nil }
        return (host, held.sequence, held.time.microsecondsSinceEpoch)
    }

    /// Tells every subscriber here that `count` messages of other hosts were lost before this host could take them
    /// in (the fleet's log no longer kept them): a `DROP $notifyd.dropped <count> 0 0`, as for messages
    /// of topics it cannot name. Never silent, and never told to the importer.
    ///
    /// A subscriber that resumes later (`since=` a time before it, or number 0) is told too, for as long as the daemon
    /// runs: the lost messages may have been of any topic, after any point it resumes from.
    public func announceMissedImports(count: UInt64) {
        let now = clock.now()
        fleet.missedImports = (fleet.missedImports ?? 0).saturatingAdd(count)
        fleet.missedImportsNewest = now
        for session in connections.open where !session.isImporter && session.subscriptionCount > 0 {
            noticeMissed(DropNotice(topic: DropNotice.manyTopics, count: count, firstSequence: 0, lastSequence: 0, reason: .fleet), id: nil, to: session)
        }
    }

    /// Whether the buffered message of `message`'s topic here is `message` already (same origin host and
    /// publisher, same bytes): so that the latest messages a bridge reads again after a restart or a reconnect are
    /// not delivered twice.
    public func holdsAlready(_ message: ImportedMessage) -> Bool {
        guard let state = topicTable[message.topic.name], let retained = retained(of: state) else { return false }
        var frame = retained.frame
        var decoder = ServerFrameDecoder(maxPayload: max(frame.readableBytes, 1))
        guard case .delivery(let held)? = try? decoder.decode(buffer: &frame) else { return false }
        return held.publisher == Publisher(uid: message.publisher.uid, pid: message.publisher.pid, unit: message.validUnit, host: message.host)
            && held.payload == message.payload
    }
}
