internal import DequeModule
import NotifyProtocol

/// Who pays for the topics' history: each message a history keeps counts, in payload bytes, against its publisher's
/// budget and the daemon's (the same sizes as for buffered messages, counted apart from them). Past either, the
/// oldest history of that publisher, or of everyone, leaves first, whatever topic it is in; history never makes a
/// publish fail.
///
/// It keeps the messages kept in the order they were published, for the daemon and for each account, as runs: one
/// entry stands for a topic's messages published one after the other (in that list), through its newest. A history
/// only ever loses its oldest messages, so evicting a run takes the ones before it in its topic too. A run whose
/// messages left their history by other means (its topic's own limits, the topic forgotten) stays in these lists as
/// a stale entry until it reaches their front, or until a list holds twice what is live and is compacted. A topic
/// published to alone, as in a burst, costs one entry however many messages it keeps. While the messages kept are
/// all one account's, as on a host where one service publishes, the daemon's order is that account's and is not
/// kept a second time (16 bytes a run, a fifth of a one-message topic's memory beside the topic's own): it is made
/// from that account's when another account's message is kept, and let go again only when the daemon is idle
/// (``shareOrder(ifAllKeptByOneOf:)``), so that two uids taking turns do not copy or free it with each publish.
/// Owned by the broker's thread.
struct HistoryLedger {
    /// A run of messages kept in `topic`'s history, through `sequence`.
    struct Reference {
        let topic: TopicState
        var sequence: UInt64

        var isLive: Bool { topic.history?.contains(sequence) ?? false }
    }

    /// Whose messages the histories keep, as far as the daemon's order is concerned.
    private enum Keepers {
        /// No one's: `order` is empty.
        case none
        /// This account's alone: the daemon's order is its own (``UserAccount/historyOrder``), and `order` is empty.
        case one(UserAccount)
        /// Maybe several accounts': `order` is the daemon's.
        case several
    }

    private var keepers = Keepers.none
    /// The daemon's order while several accounts' messages are kept.
    private var order = Deque<Reference>()
    /// The topic of the run at the end of `order`.
    private var lastTopic: ObjectIdentifier?
    /// Whether the daemon's order is left to the account whose messages are all that is kept; tests turn it off to
    /// compare.
    private let sharesOneKeepersOrder: Bool

    init(sharesOneKeepersOrder: Bool = true) {
        self.sharesOneKeepersOrder = sharesOneKeepersOrder
        if !sharesOneKeepersOrder { keepers = .several }
    }
    /// Messages kept in all histories.
    private(set) var messages = 0
    /// Their payload bytes.
    private(set) var payloadBytes = 0
    /// Their frames' bytes, as the state log holds them.
    private(set) var frameBytes = 0

    /// Counts a message `topic`'s history just kept.
    mutating func kept(_ sequence: UInt64, payloadSize: Int, frameSize: Int, in topic: TopicState, by owner: UserAccount) {
        let identifier = ObjectIdentifier(topic)
        switch keepers {
        case .none:
            keepers = .one(owner)
        case .one(let only) where only !== owner:
            // A second account's message: the daemon's order is kept apart from now on, and starts as the first
            // account's, all of it older than this message.
            order = only.historyOrder
            lastTopic = only.historyOrderLastTopic
            keepers = .several
        case .one:
            break
        case .several:
            break
        }
        if case .several = keepers {
            HistoryLedger.append(sequence, of: topic, identifier, to: &order, lastTopic: &lastTopic)
        }
        HistoryLedger.append(sequence, of: topic, identifier, to: &owner.historyOrder, lastTopic: &owner.historyOrderLastTopic)
        messages += 1
        payloadBytes += payloadSize
        frameBytes += frameSize
        owner.historyMessages += 1
        owner.historyBytes += payloadSize
        if order.count > 2 * messages + 1_024 {
            order.removeAll { !$0.isLive }
            lastTopic = order.last.map { ObjectIdentifier($0.topic) }
        }
        if owner.historyOrder.count > 2 * owner.historyMessages + 64 {
            owner.historyOrder.removeAll { !$0.isLive }
            owner.historyOrderLastTopic = owner.historyOrder.last.map { ObjectIdentifier($0.topic) }
        }
    }

    /// Extends the run at the end of `list` when it is `topic`'s (`lastTopic` says whose it is, so that no reference
    /// is copied out of the list to tell), else starts one.
    private static func append(
        _ sequence: UInt64,
        of topic: TopicState,
        _ identifier: ObjectIdentifier,
        to list: inout Deque<Reference>,
        lastTopic: inout ObjectIdentifier?
    ) {
        if lastTopic == identifier, !list.isEmpty {
            list[list.count - 1].sequence = sequence
        } else {
            list.append(Reference(topic: topic, sequence: sequence))
            lastTopic = identifier
        }
    }

    /// Counts a message that left `topic`'s history. Called while its record is still in the ring (before the
    /// history stores or moves anything): if it is the topic's buffered message, the message moves into a block of
    /// its own, as the buffered message outlives its history.
    mutating func released(_ entry: TopicHistory.Entry, from topic: TopicState) {
        if topic.retainedInHistory == entry.sequence, let history = topic.history {
            topic.retainInBlock(history.withFrame(of: entry, topic: topic.topic.name) {
                RetainedMessage.make(frame: $0, payloadSize: entry.payloadSize, sequence: entry.sequence, owner: entry.owner)
            })
        }
        messages -= 1
        payloadBytes -= entry.payloadSize
        frameBytes -= entry.length
        entry.owner.historyMessages -= 1
        entry.owner.historyBytes -= entry.payloadSize
        if case .one(let only) = keepers, only.historyMessages == 0 {
            keepers = .none
        }
    }

    /// Lets the oldest history go, `owner`'s while it holds more than `maxPerUser` bytes, then everyone's while all
    /// hold more than `maxTotal`.
    mutating func trim(for owner: UserAccount, maxPerUser: Int, maxTotal: Int) {
        while owner.historyBytes > maxPerUser, let run = owner.historyOrder.first {
            if !evictOldest(of: run) { owner.historyOrder.removeFirst() }
        }
        trim(maxTotal: maxTotal)
    }

    /// Lets the oldest history of all go while all hold more than `maxTotal` bytes.
    mutating func trim(maxTotal: Int) {
        switch keepers {
        case .none:
            break
        case .one(let only):
            while payloadBytes > maxTotal, let run = only.historyOrder.first {
                if !evictOldest(of: run) { only.historyOrder.removeFirst() }
            }
        case .several:
            while payloadBytes > maxTotal, let run = order.first {
                if !evictOldest(of: run) { order.removeFirst() }
            }
        }
    }

    /// The same for every account in `accounts`, then for all: after the budgets changed.
    mutating func trim(forAll accounts: some Sequence<UserAccount>, maxPerUser: Int, maxTotal: Int) {
        for account in accounts where account.historyBytes > maxPerUser {
            trim(for: account, maxPerUser: maxPerUser, maxTotal: .max)
        }
        trim(maxTotal: maxTotal)
    }

    /// Lets the oldest message of `run` go (one at a time: a run may be a whole history, and a budget a little
    /// over must not cost all of it).
    /// - Returns: false when none of its messages is left: the run is done with.
    private mutating func evictOldest(of run: Reference) -> Bool {
        guard let oldest = run.topic.history?.oldestSequence, oldest <= run.sequence else { return false }
        run.topic.history!.remove(through: oldest) { released($0, from: run.topic) }
        return true
    }

    /// Lets go of the daemon's own order when one account's messages are all the histories keep, or none are: that
    /// account's order is the daemon's then. Called when the daemon is idle.
    mutating func shareOrder(ifAllKeptByOneOf accounts: some Sequence<UserAccount>) {
        guard sharesOneKeepersOrder, case .several = keepers else { return }
        if messages == 0 {
            keepers = .none
        } else if let only = accounts.first(where: { $0.historyMessages == messages }) {
            keepers = .one(only)
        } else {
            return
        }
        order = Deque()
        lastTopic = nil
    }

    /// Runs in the daemon's own order, while it keeps one (tests).
    var ownOrderCount: Int { order.count }

    /// Lets go of all of `topic`'s history: the topic is forgotten.
    mutating func forget(_ topic: TopicState) {
        topic.history?.skip(sequence: 0, time: PublishTime(microsecondsSinceEpoch: 0)) { released($0, from: topic) }
        topic.history = nil
    }
}
