#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
public import NotifyProtocol

/// The broker's counters, as `STATS` reports them (PROTOCOL.md lists the names).
public struct BrokerStatistics: Sendable, Hashable {
    /// When the broker started.
    public let startTime: PublishTime
    /// Connections open now.
    public internal(set) var connections = 0
    /// Connections accepted since the broker started, refused ones included.
    public internal(set) var connectionsTotal: UInt64 = 0
    /// Subscriptions held now, over all connections.
    public internal(set) var subscriptions = 0
    /// Topics with a buffered message.
    public internal(set) var retainedTopics = 0
    /// Payload bytes of the buffered messages.
    public internal(set) var retainedBytes: UInt64 = 0
    /// Messages kept in topics' history, and their payload bytes.
    public internal(set) var historyMessages = 0
    public internal(set) var historyBytes = 0
    /// Publishes accepted.
    public internal(set) var messagesIn: UInt64 = 0
    /// Deliveries queued to subscribers.
    public internal(set) var messagesOut: UInt64 = 0
    /// Payload bytes of the publishes accepted.
    public internal(set) var bytesIn: UInt64 = 0
    /// Payload bytes of the deliveries.
    public internal(set) var bytesOut: UInt64 = 0
    /// Deliveries dropped for subscribers that fell behind.
    public internal(set) var dropped: UInt64 = 0
    /// Bytes of the frames waiting in the queues of connections that fell behind, now.
    public internal(set) var queuedBytes = 0
    /// Topics known (set when reported).
    public internal(set) var topics = 0
    /// Configurations reloaded and applied since the broker started (``Broker/recordReload(applied:)``).
    public internal(set) var reloads: UInt64 = 0
    /// Reloads refused, the configuration file being unusable (``Broker/recordReload(applied:)``).
    public internal(set) var reloadsFailed: UInt64 = 0

    init(startTime: PublishTime) {
        self.startTime = startTime
    }

    func counters(now: PublishTime) -> ServerStats {
        let uptime = (now.microsecondsSinceEpoch &- startTime.microsecondsSinceEpoch) / 1_000_000
        return ServerStats(counters: [
            .init(name: "connections", value: UInt64(connections)),
            .init(name: "connections_total", value: connectionsTotal),
            .init(name: "subscriptions", value: UInt64(subscriptions)),
            .init(name: "topics", value: UInt64(topics)),
            .init(name: "retained", value: UInt64(retainedTopics)),
            .init(name: "retained_bytes", value: retainedBytes),
            .init(name: "history_messages", value: UInt64(historyMessages)),
            .init(name: "history_bytes", value: UInt64(historyBytes)),
            .init(name: "messages_in", value: messagesIn),
            .init(name: "messages_out", value: messagesOut),
            .init(name: "bytes_in", value: bytesIn),
            .init(name: "bytes_out", value: bytesOut),
            .init(name: "dropped", value: dropped),
            .init(name: "queued_bytes", value: UInt64(queuedBytes)),
            .init(name: "uptime_seconds", value: uptime),
            .init(name: "reloads", value: reloads),
            .init(name: "reloads_failed", value: reloadsFailed),
            // Whom to signal: `notifyd --reload` asks the daemon on a socket, not whoever a pid file names.
            .init(name: "pid", value: UInt64(getpid())),
        ])
    }
}
