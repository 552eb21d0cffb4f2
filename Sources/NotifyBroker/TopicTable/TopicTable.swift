internal import DequeModule
import NIOCore
import NotifyProtocol

/// The broker's topics: each one's state by name (sequence number, buffered message, counters, cached subscriber
/// list; see ``TopicState``), the totals of their buffered messages, and the bound on how many there are.
///
/// A topic is made by its first publish and kept while it buffers a message or someone subscribes to it by name.
/// Past ``maxTopics``, the oldest of the others is forgotten to make room, and when none may be, a new topic is
/// refused. A topic forgotten is remembered by name (``ForgottenTopics``): a resume is told what it missed, and the
/// topic, made again, numbers on from its last number. Topics are also grouped by first token (``TopicGroups``), so that a
/// pattern lookup walks only the topics it can match.
///
/// Owned by the broker's thread, like the broker.
struct TopicTable {
    private var states = TopicMap()
    /// Topics with no buffered message, oldest first: the ones forgotten at ``maxTopics``, unless someone subscribes
    /// to them by name. A topic is listed at most once (``TopicState/isListedForgettable``); one that gained a
    /// buffered message since is skipped, and listed again when cleared.
    private var forgettable = Deque<ByteKey>()
    private var groups = TopicGroups()
    /// The topics forgotten, as many as the table holds at most.
    private(set) var forgottenTopics: ForgottenTopics

    /// Topics that buffer a message.
    private(set) var retainedTopics = 0
    /// Payload bytes of the buffered messages.
    private(set) var retainedBytes: UInt64 = 0
    /// Bytes of the buffered messages' frames, to tell the state log how big a compacted copy would be.
    private(set) var retainedFrameBytes = 0

    /// The most topics kept; the most forgotten ones remembered too.
    var maxTopics: Int {
        didSet { forgottenTopics.capacity = maxTopics }
    }

    init(maxTopics: Int) {
        self.maxTopics = maxTopics
        forgottenTopics = ForgottenTopics(capacity: maxTopics)
    }

    var count: Int { states.count }
    /// The length of the list of topics that may be forgotten, for tests: it stays within the number of topics.
    var forgettableCount: Int { forgettable.count }
    /// Every topic, in no particular order.
    var all: [TopicState] { states.all }

    /// The topic named `name`, if the table has it.
    subscript(name: String) -> TopicState? { states[name] }

    /// The state of `topic`, made if new: nil when the table is full and every topic in it is kept, because it
    /// buffers a message or `isKept` says so (it has subscribers by name). `work` counts the topics looked at to
    /// make room; `forgotten` is called with each topic forgotten for it.
    mutating func state(
        for topic: Topic,
        work: inout Int,
        isKept: (TopicState) -> Bool,
        forgotten: (TopicState) -> Void
    ) -> TopicState? {
        if let state = states[topic.name] { return state }
        // Back after it was forgotten: it numbers on, and its history starts after the number it had. Taken first,
        // so that the topics forgotten for it now do not push it out of what is remembered.
        let remembered = forgottenTopics.count > 0 ? forgottenTopics.take(topic.name) : nil
        while states.count >= maxTopics {
            guard let state = forgetOne(work: &work, isKept: isKept) else {
                if let remembered { forgottenTopics.remember(topic, remembered) }
                return nil
            }
            forgotten(state)
        }
        let state = TopicState(topic: topic)
        if let remembered { state.sequence = remembered.sequence }
        add(state)
        return state
    }

    /// Remembers a topic the state log says was forgotten, unless the table has it.
    mutating func restoreForgotten(_ name: String, sequence: UInt64, time: PublishTime) {
        if name == ForgottenTopics.unrememberedName {
            return forgottenTopics.restoreUnremembered(messages: sequence, newest: time)
        }
        guard states[name] == nil, let topic = try? Topic(name) else { return }
        forgottenTopics.remember(topic, .init(sequence: sequence, newest: time))
    }

    /// Adds a topic restored from the state log.
    mutating func restore(_ state: TopicState) {
        add(state)
        if let retained = state.retained {
            countRetained(topics: 1, payloadBytes: retained.payloadSize, frameBytes: retained.frameLength)
        }
    }

    private mutating func add(_ state: TopicState) {
        states.insert(state)
        groups.add(state)
        if !state.hasRetained { listForgettable(state) }
    }

    /// Lists `state` among the topics that may be forgotten, unless it is listed already: when it loses its
    /// buffered message or its last subscriber by name.
    mutating func listForgettable(_ state: TopicState) {
        guard !state.isListedForgettable else { return }
        state.isListedForgettable = true
        forgettable.append(ByteKey(state.topic.name))
        if forgettable.count > 2 * (states.count - retainedTopics) + 1_024 { dropStaleForgettable() }
    }

    /// Rewrites the list with only the topics still in it that may be forgotten, each once. A topic is listed when
    /// it is made, before its first message is buffered; a table of topics that each buffer one kept a list as long
    /// as itself, 22 bytes per topic with the deque's room to grow. Called when the list is over twice what may be
    /// forgotten, so its cost is spread over as many listings as it walks.
    private mutating func dropStaleForgettable() {
        var kept = Deque<ByteKey>()
        for key in forgettable {
            // A listed topic read as not listed here is one already kept: its flag is set again below.
            guard let state = states[key.text], state.isListedForgettable else { continue }
            state.isListedForgettable = false
            if !state.hasRetained { kept.append(key) }
        }
        for key in kept { states[key.text]?.isListedForgettable = true }
        forgettable = kept
    }

    /// Forgets the oldest topic that buffers no message and is not kept: its sequence number would start again at
    /// 1, which a subscriber by name would take for a restart. (A wildcard subscription, `>` say, keeps nothing: it
    /// would keep every topic.) Returns false when there is none. A topic passed over leaves the list, and comes back
    /// to it when it may be forgotten again.
    private mutating func forgetOne(work: inout Int, isKept: (TopicState) -> Bool) -> TopicState? {
        while let key = forgettable.popFirst() {
            work &+= 1
            guard let state = states[key.text] else { continue }
            state.isListedForgettable = false
            guard !state.hasRetained, !isKept(state) else { continue }
            states.remove(state)
            groups.remove(state)
            state.isForgotten = true
            if state.sequence > 0 {
                let newest = state.lastPublished ?? .distantFuture
                forgottenTopics.remember(state.topic, .init(sequence: state.sequence, newest: newest))
            }
            return state
        }
        return nil
    }

    /// Calls `body` with each topic `pattern` matches (every topic for nil), walking only the group of its first
    /// token when that is literal (see ``TopicGroups``).
    /// - Returns: the walk's cost as work: one per 64 topics walked.
    @discardableResult
    func forEach(matching pattern: TopicPattern?, _ body: (TopicState) -> Void) -> Int {
        if let pattern, let group = groups.candidates(for: pattern) {
            for state in group where pattern.matches(state.topic) { body(state) }
            return group.count / 64
        }
        states.forEach { state in
            if pattern?.matches(state.topic) ?? true { body(state) }
        }
        return states.count / 64
    }

    /// Adds to the totals of buffered messages: a message made (+1 topic), cleared (-1), or replaced (0), and the
    /// change in payload and frame bytes. Sizes, not the messages: holding on to a replaced message's frame here
    /// would make replacing it in place a copy.
    mutating func countRetained(topics: Int, payloadBytes: Int, frameBytes: Int) {
        retainedTopics += topics
        retainedBytes = UInt64(Int(retainedBytes) + payloadBytes)
        retainedFrameBytes += frameBytes
    }
}
