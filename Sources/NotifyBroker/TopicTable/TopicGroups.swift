import NotifyProtocol

/// The broker's topics of two tokens or more, grouped by their first token, so that a pattern that starts with a
/// literal token (`backup.*`, `host.>`) walks the topics under that token rather than the whole table: what
/// `SUB … latest` and `TOPICS` do for a pattern.
///
/// A topic of one token is in no group: a pattern of one token is a name (looked up) or `*` or `>` (every topic),
/// and a longer pattern never matches it. A pattern that starts with a wildcard (`*.status`) still walks every topic.
///
/// Costs a topic one slot in an array and its position, so that removing it takes constant time. Owned by the
/// broker's thread.
struct TopicGroups {
    private var groups: [ByteKey: [TopicState]] = [:]

    /// The first token of `name` when the name has more than one, as a key.
    private static func groupKey(of name: String) -> ByteKey? {
        guard let dot = name.utf8.firstIndex(of: TopicSyntax.dot) else { return nil }
        return ByteKey(name[..<dot])
    }

    mutating func add(_ state: TopicState) {
        guard let key = Self.groupKey(of: state.topic.name) else { return }
        groups[key, default: []].append(state)
        state.groupSlot = Int32(groups[key]!.count - 1)
    }

    mutating func remove(_ state: TopicState) {
        guard let key = Self.groupKey(of: state.topic.name) else { return }
        // Taken out while it changes, so that the array is not shared and changes in place.
        guard var group = groups.removeValue(forKey: key) else { return }
        let slot = Int(state.groupSlot)
        precondition(group[slot] === state, "a topic's slot in its group is stale")
        let last = group.removeLast()
        if slot < group.count {
            group[slot] = last
            last.groupSlot = Int32(slot)
        }
        if !group.isEmpty { groups[key] = group }
    }

    /// The topics `pattern` can match, when its first token narrows them to a group; nil when any topic can.
    func candidates(for pattern: TopicPattern) -> [TopicState]? {
        let text = pattern.text
        guard let dot = text.utf8.firstIndex(of: TopicSyntax.dot) else { return nil }
        let first = text[..<dot]
        guard first != "*", first != ">" else { return nil }
        return groups[ByteKey(first)] ?? []
    }
}
