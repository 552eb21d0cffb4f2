internal import DequeModule
import NotifyProtocol

/// What one uid holds in the broker, for the limits per user: so that one user cannot exhaust the daemon for the
/// others (as dbus-broker accounts per user).
///
/// Its sessions hold it, and so does each buffered message it published last, which counts against it until it is
/// replaced or cleared, whoever does that. The broker forgets it once it holds nothing. Owned by the broker's thread.
final class UserAccount {
    let uid: UInt32
    @exclusivity(unchecked) var connections = 0
    @exclusivity(unchecked) var subscriptions = 0
    /// Tokens of the wildcard patterns this uid subscribes to: each may cost a node of the subscription index's trie.
    @exclusivity(unchecked) var wildcardTokens = 0
    /// Payload bytes of the buffered messages this uid published.
    @exclusivity(unchecked) var retainedBytes = 0
    /// Topics whose buffered message this uid published: a 0-byte message costs no bytes, but a topic all the same.
    @exclusivity(unchecked) var retainedTopics = 0
    /// Bytes of the frames waiting for this uid's connections: in their queues, and in their write buffers.
    @exclusivity(unchecked) var queuedBytes = 0
    /// Of those, the history replayed to its connections in this batch, counted as it is written: what their write
    /// buffers hold is known only at the flush, which then counts them in its place.
    @exclusivity(unchecked) var replayedBytes = 0
    /// Bytes read from this uid's connections and not carried out yet: unfinished frames, mostly.
    @exclusivity(unchecked) var unreadBytes = 0
    /// Messages this uid published that histories keep, their payload bytes, and the order they came in (see
    /// ``HistoryLedger``).
    @exclusivity(unchecked) var historyMessages = 0
    @exclusivity(unchecked) var historyBytes = 0
    @exclusivity(unchecked) var historyOrder = Deque<HistoryLedger.Reference>()
    @exclusivity(unchecked) var historyOrderLastTopic: ObjectIdentifier?

    init(uid: UInt32) {
        self.uid = uid
    }

    /// Whether the account holds nothing, and can be forgotten.
    var isEmpty: Bool { connections == 0 && subscriptions == 0 && retainedBytes == 0 && retainedTopics == 0 && queuedBytes == 0 && unreadBytes == 0 && historyMessages == 0 }
}
