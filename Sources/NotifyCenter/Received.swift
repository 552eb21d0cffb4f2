import NIOCore
// DropNotice is NotifyProtocol's (NotifyBus re-exports it); named here, so the docs can link to that module.
public import NotifyProtocol

/// A notification as it arrived: its value, and where it came from.
public struct Received<Message: Sendable>: Sendable {
    /// The value, decoded.
    public var value: Message
    /// The topic it was posted to.
    public var topic: Topic
    /// Its number in its topic, as the daemon counts (see PROTOCOL.md).
    public var sequence: UInt64
    /// When the daemon took it.
    public var time: PublishTime
    /// Who posted it: uid, pid, systemd unit, and the host for a message of another host (federation).
    public var publisher: Publisher

    /// Creates one; the center makes them from deliveries.
    public init(value: Message, topic: Topic, sequence: UInt64, time: PublishTime, publisher: Publisher) {
        self.value = value
        self.topic = topic
        self.sequence = sequence
        self.time = time
        self.publisher = publisher
    }

    /// The host it was posted on, when that is another host than this one.
    public var host: String? { publisher.host }
}

extension Received: Equatable where Message: Equatable {}

/// A message on a typed subscription's topics that is not a value of its type: surfaced, never skipped, so that a
/// publisher of a newer or broken format is noticed.
public struct UndecodableNotification: Error, Sendable, CustomStringConvertible {
    /// The message as delivered.
    public var delivery: Delivery
    /// The type it was to be decoded as.
    public var expectedType: String
    /// What the codec said.
    public var reason: String

    /// Describes `delivery`, which did not decode as `expectedType` for `reason`.
    public init(delivery: Delivery, expectedType: String, reason: String) {
        self.delivery = delivery
        self.expectedType = expectedType
        self.reason = reason
    }

    public var description: String {
        "message \(delivery.sequence) of \(delivery.topic) (\(delivery.payload.readableBytes) bytes, from uid \(delivery.publisher.uid)"
            + " pid \(delivery.publisher.pid)) is not a \(expectedType): \(reason)"
    }
}

/// What a typed subscription receives.
public enum NotificationEvent<Message: Sendable>: Sendable {
    /// A notification of the type, decoded.
    case notification(Received<Message>)
    /// A message on its topics that did not decode as the type.
    case undecodable(UndecodableNotification)
    /// Messages dropped for this subscriber, or no longer in the history it resumed from (see
    /// ``/NotifyProtocol/DropNotice``).
    case dropped(DropNotice)
}

/// Whose notifications an observer wants: NotificationCenter's `object:` across processes. Each field left nil
/// matches anyone, but a uid, pid or unit with no host means this host's publisher (see ``matches(_:)``).
public struct Sender: Sendable, Hashable {
    /// The publisher's uid, as the kernel reported it to its host's daemon.
    public var uid: UInt32?
    /// The publisher's process id on its host.
    public var pid: Int32?
    /// The systemd unit, as the daemon read it from the publisher's cgroup.
    public var unit: String?
    /// The host, for messages of other hosts; see ``isLocal``.
    public var host: String?
    /// Only this host's publishers (true), only other hosts' (false), or either (nil).
    public var isLocal: Bool?

    /// A sender that matches a publisher agreeing with every field given.
    public init(uid: UInt32? = nil, pid: Int32? = nil, unit: String? = nil, host: String? = nil, isLocal: Bool? = nil) {
        self.uid = uid
        self.pid = pid
        self.unit = unit
        self.host = host
        self.isLocal = isLocal
    }

    /// The posts of systemd unit `name` (`backup.service`).
    public static func unit(_ name: String) -> Sender { Sender(unit: name) }

    /// Whether `publisher` is this sender.
    ///
    /// A sender that names a uid, a pid or a unit and no host means a publisher on this host, whose identity the
    /// daemon read from the kernel and systemd: another host's message only claims its uid, pid and unit (its
    /// headers in NATS say so, and any client of the NATS server can write them), so it matches only a sender that
    /// names its host (or says `isLocal: false`), and then as a claim of that host's.
    public func matches(_ publisher: Publisher) -> Bool {
        if let uid, publisher.uid != uid { return false }
        if let pid, publisher.pid != pid { return false }
        if let unit, publisher.unit != unit { return false }
        if let host, publisher.host != host { return false }
        let namesPublisher = uid != nil || pid != nil || unit != nil
        let local = isLocal ?? (host == nil && namesPublisher ? true : nil)
        if let local, (publisher.host == nil) != local { return false }
        return true
    }
}
