/// The limits a broker enforces. Each one, when reached, gets the client a `limit` error and affects nobody else.
public struct BrokerConfiguration: Sendable, Hashable {
    /// Sizes of frames, announced in the greeting.
    public var protocolLimits: ProtocolLimits
    /// The most subscriptions one connection may hold.
    public var maxSubscriptionsPerConnection: Int
    /// The most topics the broker keeps track of. Past it, topics with no buffered message are forgotten, oldest
    /// first (their sequence numbers restart at 1); if every topic holds a buffered message, publishing to a new
    /// topic is refused.
    public var maxTopics: Int

    /// 1 MiB payloads, 10,000 subscriptions per connection, one million topics.
    public static let `default` = BrokerConfiguration(
        protocolLimits: .default,
        maxSubscriptionsPerConnection: 10_000,
        maxTopics: 1_000_000
    )

    /// Creates a configuration.
    public init(protocolLimits: ProtocolLimits, maxSubscriptionsPerConnection: Int, maxTopics: Int) {
        self.protocolLimits = protocolLimits
        self.maxSubscriptionsPerConnection = maxSubscriptionsPerConnection
        self.maxTopics = max(1, maxTopics)
    }
}
