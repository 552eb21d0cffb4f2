public import NotifyProtocol

/// Something the broker did that an administrator may want to know about, reported through ``Broker/onEvent``;
/// the daemon logs these, with who did it.
public enum BrokerEvent: Sendable {
    /// A client erased a topic's buffered message.
    case cleared(Topic, by: PeerCredentials)
    /// A request was refused. `subject` is the topic or pattern it was about, when there was one.
    case refused(ProtocolError, subject: String?, by: PeerCredentials)
    /// The state log could not be written; the broker rewrites it whole at the first batch after `retryingIn`, or
    /// when ``Broker/retrySavingState()`` is called then.
    case stateNotSaved(String, retryingIn: Duration)
    /// The state log is written again after it could not be.
    case stateSavedAgain
    /// A subscriber fell behind: `count` deliveries to it were dropped in one batch of work, to keep its queue within
    /// bounds.
    case dropped(count: Int, for: PeerCredentials)
    /// A subscriber whose policy is `disconnect` fell behind its queue's bounds and was disconnected.
    case disconnectedSlowSubscriber(PeerCredentials, queuedMessages: Int)
}
