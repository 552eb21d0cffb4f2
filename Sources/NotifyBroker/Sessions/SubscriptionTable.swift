import NotifyProtocol

/// A session's subscriptions by pattern (the subscription index holds the other direction).
///
/// Most connections subscribe to one pattern (`notify subscribe backup.status`, a service that waits for one
/// topic), and a dictionary of one entry is a block of 136 bytes: one subscription is held inline, and the dictionary
/// is made for the second.
struct SubscriptionTable {
    private enum Storage {
        case empty
        /// Its pattern is the subscription's own.
        case one(Subscription)
        case many([TopicPattern: Subscription])
    }

    private var storage = Storage.empty

    var count: Int {
        switch storage {
        case .empty: 0
        case .one: 1
        case .many(let all): all.count
        }
    }

    /// Whether it holds a dictionary (more than one subscription, or did since it was last empty).
    var holdsDictionary: Bool {
        if case .many = storage { return true }
        return false
    }

    /// The subscription to exactly `pattern`, if any.
    subscript(pattern: TopicPattern) -> Subscription? {
        switch storage {
        case .empty: nil
        case .one(let subscription): subscription.pattern == pattern ? subscription : nil
        case .many(let all): all[pattern]
        }
    }

    /// Adds `subscription`, which no subscription of the table has the pattern of.
    mutating func insert(_ subscription: Subscription) {
        switch storage {
        case .empty:
            storage = .one(subscription)
        case .one(let first):
            precondition(first.pattern != subscription.pattern, "a second subscription to \(first.pattern.text)")
            storage = .many([first.pattern: first, subscription.pattern: subscription])
        case .many(var all):
            storage = .empty  // so that `all` is the dictionary's only reference, and grows in place
            let previous = all.updateValue(subscription, forKey: subscription.pattern)
            precondition(previous == nil, "a second subscription to \(subscription.pattern.text)")
            storage = .many(all)
        }
    }

    /// Removes and returns the subscription to exactly `pattern`, if any.
    mutating func remove(_ pattern: TopicPattern) -> Subscription? {
        switch storage {
        case .empty:
            return nil
        case .one(let subscription):
            guard subscription.pattern == pattern else { return nil }
            storage = .empty
            return subscription
        case .many(var all):
            storage = .empty
            let removed = all.removeValue(forKey: pattern)
            // Back to nothing when the last goes; a table that held many stays a dictionary until then.
            if !all.isEmpty { storage = .many(all) }
            return removed
        }
    }

    /// Removes every subscription, handing each to `body`.
    mutating func removeAll(_ body: (Subscription) -> Void) {
        let removed = storage
        storage = .empty
        switch removed {
        case .empty: break
        case .one(let subscription): body(subscription)
        case .many(let all): all.values.forEach(body)
        }
    }
}
