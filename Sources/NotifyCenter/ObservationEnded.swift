public import NotifyBus

/// An observation the center ended by itself, because its subscription did: the connection was lost for good (past
/// the reconnect window), or the daemon refused or closed it. Its observer receives nothing more; observe again
/// (on a new center, if the connection is gone) to go on.
public struct ObservationEnded: Error, Sendable, CustomStringConvertible {
    /// The topics the observation was of.
    public var topics: TopicPattern
    /// The type its notifications were decoded as.
    public var messageType: String
    /// Why its subscription ended, as the connection said; nil when it closed without an error.
    public var reason: (any Error)?

    /// Describes the end of an observation of `topics`, decoded as `messageType`, for `reason`.
    public init(topics: TopicPattern, messageType: String, reason: (any Error)?) {
        self.topics = topics
        self.messageType = messageType
        self.reason = reason
    }

    public var description: String {
        "the observation of \(messageType) on \(topics) ended: " + (reason.map { "\($0)" } ?? "the connection closed")
    }
}
