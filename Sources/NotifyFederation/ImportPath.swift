package import NATSClient
package import NotifyProtocol
package import NotifyBroker

/// What this host does with a message another host published, as read from NATS: its provenance read from the
/// headers (``Provenance``), checked (``ImportFilter``), and published here through the broker's importer session,
/// which checks it again as it would a local publish (``Broker/publishImported(_:through:)``). No I/O: the bridge
/// hands it each message it reads; the import fuzzer and the tests hand it forged ones.
package struct ImportPath {
    package enum Outcome: Equatable {
        case published
        /// Another host's `CLEAR`: the buffered message here was cleared, unless a newer one was there.
        case cleared
        /// A repeat of a message taken in already: skipped, and counted in ``ImportFilter/repeats``.
        case repeated
        /// A message under this host's own name: its own, read back from the stream; or, live, another host's that
        /// goes by the same name, whose messages this host can never take in.
        case ownName
        /// Not taken in, for the reason given.
        case refused(String)
    }

    /// This host's name: messages under it are never taken in.
    package var hostName: String
    /// What was taken in so far, to tell repeats.
    package private(set) var filter = ImportFilter()
    /// The provenance of the last message, whose host and unit the next one likely shares.
    private var lastProvenance: Provenance?

    package init(hostName: String) {
        self.hostName = hostName
    }

    /// Forgets what was taken in (another cluster, other settings): a message may then be taken in again.
    package mutating func forgetTaken() {
        filter.forgetTaken()
    }

    /// Takes in `message`, whose subject names `topic`, published through `importer`, when this host's clock reads
    /// `now` (microseconds since the epoch). `replayed`: read from the stream of latest messages, where a message
    /// the broker holds already is a repeat.
    package mutating func take(
        _ message: NATSMessage,
        topic: Topic,
        replayed: Bool,
        into broker: Broker,
        through importer: Session,
        now: UInt64
    ) -> Outcome {
        let provenance = Provenance(headers: message.headers, reusing: lastProvenance)
        lastProvenance = provenance
        let host = provenance.host ?? Provenance.unknownHost
        // A host that is not a host name is the broker's to refuse (publishImported), with the other claims.
        guard host != hostName else { return .ownName }
        let sequence = provenance.sequence
        // What this host took in before it started (its state log holds it) counts as taken: a message sent to it
        // again (a stream's redelivery of what was not acknowledged when the daemon stopped) is then a repeat.
        if !filter.knows(topic), let newest = broker.newestImported(of: topic) {
            filter.taken(topic: topic, host: newest.host, sequence: newest.sequence, time: newest.time, now: now)
        }
        switch filter.decide(topic: topic, host: host, sequence: sequence, time: provenance.time, now: now) {
        case .take: break
        case .repeated: return .repeated
        case .refused(let why): return .refused(why)
        }
        if provenance.isClear {
            // Its time decides against the buffered message here; the broker checks the access rules.
            if let refusal = broker.clearImported(topic, at: provenance.time, replayed: replayed, through: importer) { return .refused(refusal.message) }
            filter.taken(topic: topic, host: host, sequence: sequence, time: provenance.time, now: now)
            return .cleared
        }
        let imported = ImportedMessage(
            topic: topic,
            payload: message.payload,
            retain: provenance.retain,
            host: host,
            publisher: Publisher(uid: provenance.uid, pid: provenance.pid, unit: provenance.unit),
            sequence: sequence
        )
        if replayed && broker.holdsAlready(imported) {
            filter.noteRepeat()
            return .repeated
        }
        switch broker.publishImported(imported, through: importer) {
        case .published:
            filter.taken(topic: topic, host: host, sequence: sequence, time: provenance.time, now: now)
            return .published
        case .refused(let error):
            return .refused(error.message)
        }
    }
}
