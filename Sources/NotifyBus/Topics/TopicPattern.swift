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
    init(unchecked text: String) {
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
        let patternTokens = tokens
        let topicTokens = topic.tokens
        if topic.isReserved, let first = patternTokens.first, first == "*" || first == ">" { return false }
        for (index, token) in patternTokens.enumerated() {
            if token == ">" { return topicTokens.count > index }
            if index >= topicTokens.count { return false }
            if token != "*" && !String(token).sameBytes(as: String(topicTokens[index])) { return false }
        }
        return patternTokens.count == topicTokens.count
    }

    public var description: String { text }

    /// Patterns are equal when their texts are equal byte for byte.
    public static func == (lhs: TopicPattern, rhs: TopicPattern) -> Bool { lhs.text.sameBytes(as: rhs.text) }

    public func hash(into hasher: inout Hasher) { ByteKey(text).hash(into: &hasher) }
}
