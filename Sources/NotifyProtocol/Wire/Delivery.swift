public import NIOCore

/// A published message as a subscriber receives it: the topic, its place in the topic's sequence, when and by whom
/// it was published, and the payload.
public struct Delivery: Sendable, Hashable {
    /// The topic it was published to.
    public var topic: Topic
    /// Its sequence number within the topic: 1 for the topic's first message, then one more for each.
    public var sequence: UInt64
    /// When the daemon accepted it.
    public var time: PublishTime
    /// Who published it, as the kernel reported.
    public var publisher: Publisher
    /// The bytes published, unchanged.
    public var payload: ByteBuffer

    /// Creates a delivery.
    public init(topic: Topic, sequence: UInt64, time: PublishTime, publisher: Publisher, payload: ByteBuffer) {
        self.topic = topic
        self.sequence = sequence
        self.time = time
        self.publisher = publisher
        self.payload = payload
    }

    /// The host it was published on, when that is another host than the daemon's (``Publisher/host``).
    public var host: String? { publisher.host }

    /// The payload as text, when it is valid UTF-8.
    public var text: String? {
        payload.withUnsafeReadableBytes { String(validating: $0, as: UTF8.self) }
    }

    /// The payload's bytes.
    public var bytes: [UInt8] { Array(payload.readableBytesView) }
}

/// The process that published a message, as the kernel identified it (`SO_PEERCRED`), never as it claimed.
public struct Publisher: Sendable, Hashable {
    /// The publisher's user id.
    public var uid: UInt32
    /// The publisher's process id.
    public var pid: Int32
    /// The publisher's systemd unit, when it runs in one and the daemon could tell.
    public var unit: String?
    /// The host it was published on, for a message another host's daemon sent on (federation, see
    /// docs/federation.md); nil for one published on the daemon's own host. The uid, pid and unit are that host's.
    public var host: String?

    /// Creates a publisher identity.
    public init(uid: UInt32, pid: Int32, unit: String? = nil, host: String? = nil) {
        self.uid = uid
        self.pid = pid
        self.unit = unit
        self.host = host
    }
}
