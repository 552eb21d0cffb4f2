import NotifyProtocol

/// Which sessions a topic's messages go to: every subscription by its pattern (the ``SubscriptionIndex``), and each
/// topic's cached list of the sessions it matched, so that a publish normally costs one comparison here and one write
/// per subscriber, not a walk of the index.
///
/// A change to a literal subscription empties that one topic's list at once (``dropList(of:)``); a change to a
/// wildcard subscription bumps ``wildcardGeneration``, and every list is made again from the index on its topic's
/// next publish. The lists together hold about ``BrokerConfiguration/maxCachedSubscriberEntries`` entries (the last
/// list made may go past it): wildcard subscribers times topics has no bound of its own.
///
/// The broker owns one and keeps it in step with ``Session/subscriptions``, the other direction.
struct SubscriberRouting {
    /// Pattern → subscriptions (each knows its session and overflow policy).
    let index = SubscriptionIndex<Subscription>()
    /// Bumped by a change to a wildcard subscription, or to who may read what: every topic's list is stale then.
    private(set) var wildcardGeneration: UInt64 = 0
    /// Entries in the topics' lists, stale ones included.
    private(set) var cachedEntries = 0
    /// Marks the sessions already in a list being made, so each is in it once.
    private var matchStamp: UInt64 = 0

    /// Adds `subscription` to the index; the caller then says the pattern changed (``patternChanged(_:in:)``).
    func insert(_ subscription: Subscription) { index.insert(subscription, for: subscription.pattern) }

    /// Takes `subscription` out of the index; the caller then says the pattern changed.
    func remove(_ subscription: Subscription) { index.remove(subscription, for: subscription.pattern) }

    /// Lets go of the lists a change to `pattern`'s subscriptions may have made wrong.
    /// - Returns: the topic a literal pattern names, if the table has it (its last subscriber by name may be gone).
    @discardableResult
    mutating func patternChanged(_ pattern: TopicPattern, in topics: TopicTable) -> TopicState? {
        guard pattern.isLiteral else {
            wildcardGeneration &+= 1
            return nil
        }
        guard let state = topics[pattern.text] else { return nil }
        dropList(of: state)
        return state
    }

    /// Makes every list stale at once: the access policy that filtered them changed.
    mutating func everyListChanged() { wildcardGeneration &+= 1 }

    /// Whether `state`'s list is the one to use.
    @inline(__always)
    func isCurrent(_ state: TopicState) -> Bool { state.subscribersGeneration == wildcardGeneration }

    /// Makes `state`'s list from the index: each session once, with its strictest overflow policy, and only those
    /// `policy` lets read the topic (a wildcard may match topics its connection may not read). Past `bound` entries
    /// in all, stale lists go first, then every other.
    /// - Returns: the list, and the walks' cost as work.
    mutating func makeList(of state: TopicState, policy: AccessPolicy, bound: Int, topics: TopicTable) -> (list: [SubscriberTarget], work: Int) {
        matchStamp &+= 1
        let stamp = matchStamp
        var list: [SubscriberTarget] = []
        index.forEachMatch(of: state.topic) { subscription in
            let session = subscription.session
            guard policy.allows(.read, topic: state.topic, peer: session.peer) else { return }
            if session.matchStamp != stamp {
                session.matchStamp = stamp
                session.matchPosition = list.count
                list.append(SubscriberTarget(session: session, overflow: subscription.overflow))
            } else {
                list[session.matchPosition].overflow = .strictest(list[session.matchPosition].overflow, subscription.overflow)
            }
        }
        cachedEntries += list.count - state.subscribers.count
        state.subscribers = list
        state.subscribersGeneration = wildcardGeneration
        var work = list.count / 64
        if cachedEntries > bound {
            // A walk of the topics once per that many entries made, and each list one walk of the index when next
            // needed.
            work &+= releaseStaleLists(in: topics)
            if cachedEntries > bound {
                work &+= topics.forEach(matching: nil) { if $0 !== state { dropList(of: $0) } }
            }
        }
        return (list, work)
    }

    /// Forgets `state`'s list, and the sessions it holds, until its next publish makes it again.
    mutating func dropList(of state: TopicState) {
        cachedEntries -= state.subscribers.count
        state.invalidateSubscribers()
    }

    /// Lets go of the lists made stale, and of the closed sessions they hold: each would otherwise stay until its
    /// topic's next publish, which may never come. Walks every topic.
    /// - Returns: the walk's cost as work.
    @discardableResult
    mutating func releaseStaleLists(in topics: TopicTable) -> Int {
        topics.forEach(matching: nil) { state in
            if state.subscribersGeneration != wildcardGeneration { dropList(of: state) }
        }
    }
}
