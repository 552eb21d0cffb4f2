/// What a subscriber listens to: a topic name in which `*` stands for exactly one token and a final `>` for one or
/// more tokens.
///
/// `backup.*.done` matches `backup.nightly.done` but not `backup.done`; `backup.>` matches `backup.nightly` and
/// `backup.nightly.done` but not `backup`. A pattern whose first token is a wildcard does not match reserved topics
/// (those starting with `$`): subscribing to `>` means "everything users publish", not the daemon's own topics.
/// A pattern without wildcards matches exactly the topic of the same name.
public struct TopicPattern: Hashable, Sendable, CustomStringConvertible {
    /// The pattern as written.
    public let text: String

    /// Whether the pattern contains no wildcard, so it matches exactly one topic.
    public let isLiteral: Bool

    /// Validates `text` as a subscription pattern.
    /// - Throws: ``TopicError`` naming the rule that `text` breaks.
    public init(_ text: String) throws(TopicError) {
        try TopicSyntax.validate(text, kind: .pattern, maxLength: Topic.maxLength)
        self.init(unchecked: text)
    }

    /// The pattern that matches exactly `topic`.
    public init(_ topic: Topic) {
        self.init(unchecked: topic.name)
    }

    /// Wraps a pattern that was validated already.
    package init(unchecked text: String) {
        self.text = text
        self.isLiteral = !text.utf8.contains { $0 == UInt8(ascii: "*") || $0 == UInt8(ascii: ">") }
    }

    /// The dot-separated tokens of the pattern, wildcards included.
    public var tokens: [Substring] { TopicSyntax.tokens(of: text) }

    /// Whether `topic` is one of the topics this pattern stands for.
    ///
    /// This walks the two names token by token; to match one topic against many patterns, use a
    /// ``SubscriptionIndex``.
    public func matches(_ topic: Topic) -> Bool {
        if isLiteral { return text.sameBytes(as: topic.name) }
        var pattern = text
        var name = topic.name
        let reserved = topic.isReserved
        // On the bytes, allocating nothing: TOPICS and SUB … latest run it over every topic.
        return pattern.withUTF8 { pattern in
            name.withUTF8 { name in TopicPattern.matches(pattern: pattern, name: name, nameIsReserved: reserved) }
        }
    }

    private static func matches(pattern: UnsafeBufferPointer<UInt8>, name: UnsafeBufferPointer<UInt8>, nameIsReserved: Bool) -> Bool {
        let dot = TopicSyntax.dot
        var p = 0  // the start of the pattern's token
        var n = 0  // the start of the name's token; past its end once the name has no more
        while p < pattern.count {
            var patternEnd = p
            while patternEnd < pattern.count && pattern[patternEnd] != dot { patternEnd += 1 }
            guard n < name.count else { return false }
            var nameEnd = n
            while nameEnd < name.count && name[nameEnd] != dot { nameEnd += 1 }
            let isWildcard = patternEnd - p == 1 && (pattern[p] == UInt8(ascii: "*") || pattern[p] == UInt8(ascii: ">"))
            if isWildcard && p == 0 && nameIsReserved { return false }
            if isWildcard && pattern[p] == UInt8(ascii: ">") { return true }
            if !isWildcard {
                guard patternEnd - p == nameEnd - n else { return false }
                for offset in 0..<(patternEnd - p) where pattern[p + offset] != name[n + offset] { return false }
            }
            p = patternEnd + 1
            n = nameEnd + 1
        }
        return n > name.count
    }

    public var description: String { text }

    /// Patterns are equal when their texts are equal byte for byte.
    public static func == (lhs: TopicPattern, rhs: TopicPattern) -> Bool { lhs.text.sameBytes(as: rhs.text) }

    public func hash(into hasher: inout Hasher) { ByteKey(text).hash(into: &hasher) }
}
