package import NATSClient
package import NotifyProtocol
import NIOCore

/// What the fleet service makes of a message another host published, as read from NATS: its provenance read from
/// the headers (``Provenance``), and the `IMPORT` request that hands it to the daemon, which checks every claim in it
/// again where the request enters. No I/O: the bridge hands it each message it reads; the import fuzzer and the
/// tests hand it forged ones.
package struct ImportForwarder {
    package enum Outcome: Equatable {
        /// For the daemon to take in (or refuse).
        case forward(FleetImport)
        /// A message under this host's own name: its own, read back from a stream; or, live, another host's that
        /// goes by the same name, whose messages this host can never take in.
        case ownName
        /// Not sent to the daemon: its host is not one a request can carry, or it is over the daemon's limits (which
        /// the daemon would refuse anyway, without reading it).
        case refused(String)
    }

    /// This host's name: messages under it are never taken in.
    package var hostName: String
    /// The provenance of the last message, whose host and unit the next one likely shares.
    private var lastProvenance: Provenance?
    /// The last `<host>/<unit>` field written, and whose it was: made once for a run of one publisher's messages.
    private var lastUnitField: (host: String?, unit: String?, field: String)?
    /// The last host name found valid: a run of one host's messages checks its name once.
    private var lastValidHost: String?

    package init(hostName: String) {
        self.hostName = hostName
    }

    /// The `<host>/<unit>` field of an `IMPORT` line for `publisher` (``Publisher/unitField``), made once per run of
    /// messages of one host and unit.
    package mutating func unitField(of publisher: Publisher) -> String {
        if let last = lastUnitField, last.host == publisher.host, last.unit == publisher.unit { return last.field }
        let field = publisher.unitField
        lastUnitField = (publisher.host, publisher.unit, field)
        return field
    }

    /// The request for `message`, whose subject names `topic`, to a daemon that takes `limits`. `replayed`: read from
    /// the stream of latest messages.
    package mutating func request(for message: NATSMessage, topic: Topic, replayed: Bool, limits: ProtocolLimits = .default) -> Outcome {
        request(for: message, provenance: provenance(of: message), topic: topic, replayed: replayed, limits: limits)
    }

    /// Whether `host` may go on a request's line (``FleetImport/isValidHostName(_:)``), checked once per run of
    /// messages of one host (whose name ``provenance(of:)`` hands as the same `String`).
    package mutating func isValidHostName(_ host: String) -> Bool {
        if host == lastValidHost { return true }
        guard FleetImport.isValidHostName(host) else { return false }
        lastValidHost = host
        return true
    }

    /// `message`'s provenance, read from its headers (the host and unit shared with the last one's when the same).
    package mutating func provenance(of message: NATSMessage) -> Provenance {
        let provenance = Provenance(headers: message.headers, reusing: lastProvenance)
        lastProvenance = provenance
        return provenance
    }

    /// The request for `message`, whose provenance was read already.
    package mutating func request(
        for message: NATSMessage,
        provenance: Provenance,
        topic: Topic,
        replayed: Bool,
        limits: ProtocolLimits = .default
    ) -> Outcome {
        let host = provenance.host ?? Provenance.unknownHost
        guard host != hostName else { return .ownName }
        // The host goes on the request's line: only a host name may (no space, no `/`, no line break).
        guard isValidHostName(host) else {
            return .refused("its origin host is not a host name (1 to 64 letters, digits, '.', '-', '_')")
        }
        // What the daemon's decoder would refuse without reading it: refused here, with the sentence it would say.
        if message.payload.readableBytes > limits.maxPayload {
            return .refused("its \(message.payload.readableBytes)-byte payload is over this daemon's max-payload (\(limits.maxPayload))")
        }
        if topic.name.utf8.count > limits.maxTopic {
            return .refused("its topic is \(topic.name.utf8.count) bytes, over this daemon's max-topic-length (\(limits.maxTopic))")
        }
        let kind: FleetMessageKind = provenance.isClear ? .clear : provenance.retain ? .retained : .notRetained
        return .forward(
            FleetImport(
                delivery: Delivery(
                    topic: topic,
                    sequence: provenance.sequence,
                    time: PublishTime(microsecondsSinceEpoch: provenance.time),
                    publisher: Publisher(uid: provenance.uid, pid: provenance.pid, unit: provenance.unit, host: host),
                    payload: provenance.isClear ? ByteBuffer() : message.payload
                ),
                kind: kind,
                replayed: replayed && kind != .notRetained
            )
        )
    }
}
