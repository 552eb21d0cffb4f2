/// Answers "which subscriptions match this topic?" with many exact subscriptions and many wildcard patterns.
///
/// Two indexes, kept in step by ``insert(_:for:)`` and ``remove(_:for:)`` only:
/// - `exact`: topic name -> subscribers, for patterns without wildcards. Matching costs one hash lookup, however many
///   exact subscriptions there are.
/// - `root`: a token trie for wildcard patterns. A node maps each literal token to a child, has an optional child
///   for `*`, the subscribers whose pattern ends at the node, and those whose pattern ends in `>` right after it.
///   Matching visits only nodes on paths the topic can take, each at most once.
///
/// An empty entry or trie node is freed as soon as its last subscriber leaves: millions of abandoned one-off
/// subscriptions must not pile up.
///
/// A subscriber registered under several patterns that match one topic is reported once per pattern; deduplicating
/// per connection is the caller's business.
///
/// Not thread-safe: it belongs to whoever owns the broker state (one event loop).
/// The API is inlinable so that callers in other modules get code specialized for their `Subscriber` type.
public final class SubscriptionIndex<Subscriber: Hashable> {
    @usableFromInline
    package final class Node {
        /// Literal token -> child.
        @usableFromInline package var children: [ByteKey: Node] = [:]
        /// The child for `*`.
        @usableFromInline package var anyChild: Node?
        /// Subscribers whose pattern ends at this node.
        @usableFromInline package var endingHere: Set<Subscriber> = []
        /// Subscribers whose pattern continues with a final `>` after this node.
        @usableFromInline package var restAfterHere: Set<Subscriber> = []

        @inlinable package init() {}

        @inlinable
        package var isUnused: Bool {
            children.isEmpty && anyChild == nil && endingHere.isEmpty && restAfterHere.isEmpty
        }
    }

    @usableFromInline package var exact: [ByteKey: SubscriberSet<Subscriber>] = [:]
    @usableFromInline package let root = Node()

    /// The number of (pattern, subscriber) registrations.
    public private(set) var count: Int {
        get { _count }
        set { _count = newValue }
    }
    @usableFromInline package var _count = 0

    /// Creates an empty index.
    @inlinable
    public init() {}

    /// Whether someone subscribes to exactly `name` (a pattern without wildcards): one hash lookup.
    public func hasExactSubscribers(to name: String) -> Bool {
        exact[ByteKey(name)] != nil
    }

    /// Registers `subscriber` for `pattern`.
    /// - Returns: false when that subscriber was already registered for that pattern (nothing changes).
    @inlinable
    @discardableResult
    public func insert(_ subscriber: Subscriber, for pattern: TopicPattern) -> Bool {
        let inserted: Bool
        if pattern.isLiteral {
            let key = ByteKey(pattern.text)
            switch exact[key]?.insert(subscriber) {
            case nil:
                exact[key] = .one(subscriber)
                inserted = true
            case let isNew?:
                inserted = isNew
            }
        } else {
            var node = root
            var endsWithRest = false
            for token in TopicSyntax.tokens(of: pattern.text) {
                if token == ">" {
                    endsWithRest = true
                    break
                }
                node = child(of: node, for: token)
            }
            inserted =
                endsWithRest
                ? node.restAfterHere.insert(subscriber).inserted
                : node.endingHere.insert(subscriber).inserted
        }
        if inserted { _count += 1 }
        return inserted
    }

    /// Unregisters `subscriber` from `pattern`, freeing index entries that become empty.
    /// - Returns: false when that subscriber was not registered for that pattern.
    @inlinable
    @discardableResult
    public func remove(_ subscriber: Subscriber, for pattern: TopicPattern) -> Bool {
        let removed: Bool
        if pattern.isLiteral {
            let key = ByteKey(pattern.text)
            switch exact[key]?.remove(subscriber) {
            case nil, .notThere?: return false
            case .removed?: removed = true
            case .removedLast?:
                exact[key] = nil
                removed = true
            }
        } else {
            let tokens = TopicSyntax.tokens(of: pattern.text)
            removed = removeFromTrie(subscriber, tokens: tokens[...], at: root)
        }
        if removed { _count -= 1 }
        return removed
    }

    /// Calls `body` once for every (pattern, subscriber) registration whose pattern matches `topic`.
    @inlinable
    public func forEachMatch(of topic: Topic, _ body: (Subscriber) throws -> Void) rethrows {
        try exact[ByteKey(topic.name)]?.forEach(body)
        if root.isUnused { return }
        let name = topic.name
        // Wildcards in the first position do not reach the daemon's reserved `$` topics.
        try visit(root, name: name, from: name.startIndex, skipWildcards: topic.isReserved, body)
    }

    /// The subscribers registered for patterns that match `topic`, once per matching registration.
    @inlinable
    public func matches(of topic: Topic) -> [Subscriber] {
        var result: [Subscriber] = []
        forEachMatch(of: topic) { result.append($0) }
        return result
    }

    /// Whether no subscriber is registered at all.
    @inlinable
    public var isEmpty: Bool { _count == 0 }

    /// The number of entries held: exact names plus trie nodes below the root. Tests use it to check that
    /// memory is given back.
    package var storageCount: Int {
        func nodes(below node: Node) -> Int {
            node.children.values.reduce(0) { $0 + 1 + nodes(below: $1) } + (node.anyChild.map { 1 + nodes(below: $0) } ?? 0)
        }
        return exact.count + nodes(below: root)
    }

    // MARK: - Trie

    @inlinable
    package func child(of node: Node, for token: Substring) -> Node {
        if token == "*" {
            if let existing = node.anyChild { return existing }
            let created = Node()
            node.anyChild = created
            return created
        }
        let key = ByteKey(token)
        if let existing = node.children[key] { return existing }
        let created = Node()
        node.children[key] = created
        return created
    }

    /// Removes `subscriber` at the end of `tokens` below `node`; prunes children left unused on the way back up.
    @inlinable
    package func removeFromTrie(_ subscriber: Subscriber, tokens: ArraySlice<Substring>, at node: Node) -> Bool {
        guard let token = tokens.first else {
            return node.endingHere.remove(subscriber) != nil
        }
        if token == ">" {
            return node.restAfterHere.remove(subscriber) != nil
        }
        let rest = tokens.dropFirst()
        if token == "*" {
            guard let next = node.anyChild, removeFromTrie(subscriber, tokens: rest, at: next) else { return false }
            if next.isUnused { node.anyChild = nil }
        } else {
            let key = ByteKey(token)
            guard let next = node.children[key], removeFromTrie(subscriber, tokens: rest, at: next) else {
                return false
            }
            if next.isUnused { node.children[key] = nil }
        }
        return true
    }

    /// Reports the subscribers of every node that the rest of `name`, starting at `start`, leads to from `node`.
    @inlinable
    package func visit(
        _ node: Node,
        name: String,
        from start: String.Index,
        skipWildcards: Bool,
        _ body: (Subscriber) throws -> Void
    ) rethrows {
        // `start` is the first byte of a token: at least one token remains, so `>` after this node matches.
        if !skipWildcards {
            for subscriber in node.restAfterHere { try body(subscriber) }
        }
        let utf8 = name.utf8
        let end = utf8[start...].firstIndex(of: UInt8(ascii: ".")) ?? name.endIndex
        let isLast = end == name.endIndex
        let next = isLast ? end : utf8.index(after: end)

        if let child = node.children[ByteKey(name[start..<end])] {
            try report(child, name: name, next: next, isLast: isLast, body)
        }
        if !skipWildcards, let child = node.anyChild {
            try report(child, name: name, next: next, isLast: isLast, body)
        }
    }

    @inlinable
    package func report(
        _ node: Node,
        name: String,
        next: String.Index,
        isLast: Bool,
        _ body: (Subscriber) throws -> Void
    ) rethrows {
        if isLast {
            for subscriber in node.endingHere { try body(subscriber) }
        } else {
            try visit(node, name: name, from: next, skipWildcards: false, body)
        }
    }
}
