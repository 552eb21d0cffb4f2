/// The subscribers of one topic name in a ``SubscriptionIndex``'s exact entries.
///
/// Most topics named exactly have one subscriber (a service waiting for its topic, `notify subscribe` on one), and a
/// `Set` of one is a block of 80 bytes: one subscriber is held inline, and the set is made for the second. It holds at
/// least one subscriber: an entry whose last one leaves is removed.
@usableFromInline
package enum SubscriberSet<Subscriber: Hashable> {
    case one(Subscriber)
    case many(Set<Subscriber>)

    /// Adds `subscriber`.
    /// - Returns: false when it was there already (nothing changes).
    @inlinable
    package mutating func insert(_ subscriber: Subscriber) -> Bool {
        switch self {
        case .one(let first):
            guard first != subscriber else { return false }
            self = .many([first, subscriber])
            return true
        case .many(var all):
            self = .one(subscriber)  // so that `all` is the set's only reference, and grows in place
            let inserted = all.insert(subscriber).inserted
            self = .many(all)
            return inserted
        }
    }

    /// What ``remove(_:)`` did.
    @usableFromInline
    package enum Removal {
        case notThere
        case removed
        /// It was the only one: the entry is to be removed (the set still holds it, as it holds at least one).
        case removedLast
    }

    /// Removes `subscriber`, in place.
    @inlinable
    package mutating func remove(_ subscriber: Subscriber) -> Removal {
        switch self {
        case .one(let only):
            return only == subscriber ? .removedLast : .notThere
        case .many(var all):
            self = .one(subscriber)  // so that `all` is the set's only reference, and shrinks in place
            let removed = all.remove(subscriber) != nil
            if all.count == 1, let last = all.first {
                self = .one(last)
            } else {
                self = .many(all)
            }
            return removed ? .removed : .notThere
        }
    }

    @inlinable
    package func forEach(_ body: (Subscriber) throws -> Void) rethrows {
        switch self {
        case .one(let only): try body(only)
        case .many(let all): for subscriber in all { try body(subscriber) }
        }
    }
}
