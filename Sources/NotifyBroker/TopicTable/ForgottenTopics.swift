internal import DequeModule
import NotifyProtocol

/// The topics the table forgot to make room (``TopicTable/maxTopics``), by name: each one's last sequence number
/// and the time of its last message. So a subscriber that resumes one is told
/// what it missed (`DROP`), never silently nothing, and a topic that comes back numbers on from where it was instead
/// of from 1, which its subscribers by number would take for messages they had.
///
/// Bounded, as the table is, by the same ``capacity``: past it, the oldest name is let go of, and what it held is
/// counted in ``unremembered``, which a resume by time announces as messages of many topics.
///
/// Owned by the broker's thread, like the table.
struct ForgottenTopics {
    struct Entry: Equatable {
        /// The topic's last sequence number.
        var sequence: UInt64
        /// When its last message was published; ``PublishTime/distantFuture`` when the daemon cannot tell (a topic
        /// restored from the log without a message): any resume by time may have missed its messages.
        var newest: PublishTime
    }

    /// The most names remembered; lowered, the oldest past it are let go of at once.
    var capacity: Int {
        didSet { evictPastCapacity() }
    }
    /// The name under which the state log keeps ``unremembered``: a `$` topic, which no client can publish to.
    static let unrememberedName = "$notifyd.unremembered"
    /// Messages of forgotten topics no longer remembered by name, and the time of the newest of them.
    private(set) var unremembered: (messages: UInt64, newest: PublishTime) = (0, PublishTime(microsecondsSinceEpoch: 0))

    /// Name -> the topic, its entry, and the serial of its place in ``order``.
    private var entries: [String: (topic: Topic, entry: Entry, serial: UInt64)] = [:]
    /// Names in the order they were remembered, oldest first; a name taken back (or remembered again) stays here
    /// until its turn comes, and is then skipped by its serial.
    private var order = Deque<(name: String, serial: UInt64)>()
    private var nextSerial: UInt64 = 0

    init(capacity: Int) {
        self.capacity = capacity
    }

    var count: Int { entries.count }
    /// Whether no topic was ever forgotten (or all came back): the usual case, which costs resumes nothing.
    var isEmpty: Bool { entries.isEmpty && unremembered.messages == 0 }

    subscript(name: String) -> Entry? { entries[name]?.entry }

    /// Remembers that `topic` was forgotten, as `entry` says; lets go of the oldest past ``capacity``.
    mutating func remember(_ topic: Topic, _ entry: Entry) {
        nextSerial += 1
        entries[topic.name] = (topic, entry, nextSerial)
        order.append((topic.name, nextSerial))
        evictPastCapacity()
        // Names taken back leave their places behind: the list is rewritten once it is twice what is remembered.
        if order.count > 2 * entries.count + 1_024 {
            order = Deque(order.filter { entries[$0.name]?.serial == $0.serial })
        }
    }

    /// Counts what the state log said was no longer remembered by name (at the start).
    mutating func restoreUnremembered(messages: UInt64, newest: PublishTime) {
        unremembered = (unremembered.messages.saturatingAdd(messages), max(unremembered.newest, newest))
    }

    private mutating func evictPastCapacity() {
        while entries.count > capacity, let (oldest, serial) = order.popFirst() {
            guard let held = entries[oldest], held.serial == serial else { continue }
            entries[oldest] = nil
            unremembered = (unremembered.messages.saturatingAdd(held.entry.sequence), max(unremembered.newest, held.entry.newest))
        }
    }

    /// The entry of `name`, forgotten from here: the topic is back.
    mutating func take(_ name: String) -> Entry? {
        entries.removeValue(forKey: name)?.entry
    }

    /// Calls `body` with each remembered topic's name and entry.
    func forEachEntry(_ body: (String, Entry) -> Void) {
        for (name, held) in entries { body(name, held.entry) }
    }

    /// Calls `body` with each remembered topic `pattern` matches.
    /// - Returns: the walk's cost as work: one per 64 names walked.
    @discardableResult
    func forEach(matching pattern: TopicPattern, _ body: (Topic, Entry) -> Void) -> Int {
        for held in entries.values where pattern.matches(held.topic) {
            body(held.topic, held.entry)
        }
        return entries.count / 64
    }
}
