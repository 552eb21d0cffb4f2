/// The name of one topic, such as `backup.nightly.done`: something one can publish to.
///
/// A topic is 1 to 255 bytes of UTF-8: tokens separated by single dots, no token empty, no whitespace or control
/// characters, and no wildcards (`*`, `>`). A value of this type has always been validated.
/// Names that start with `$` are reserved for the daemon (see ``isReserved``).
public struct Topic: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The longest name the protocol allows, in bytes.
    public static let maxLength = TopicSyntax.defaultMaxLength

    /// The name, as published.
    public let name: String

    /// Validates `name` as a topic one can publish to.
    /// - Throws: ``TopicError`` naming the rule that `name` breaks.
    public init(_ name: String) throws(TopicError) {
        try TopicSyntax.validate(name, kind: .topic, maxLength: Topic.maxLength)
        self.name = name
    }

    /// Wraps a name that was validated already (by the decoder, on bytes).
    package init(unchecked name: String) {
        self.name = name
    }

    /// Whether the name is exactly `bytes`, compared without making a string of them.
    package func hasName(_ bytes: UnsafeRawBufferPointer) -> Bool { name.hasBytes(bytes) }

    /// Whether the name starts with `$`: such topics are published by the daemon only.
    public var isReserved: Bool { name.utf8.first == UInt8(ascii: "$") }

    /// The dot-separated tokens of the name.
    public var tokens: [Substring] { TopicSyntax.tokens(of: name) }

    public var description: String { name }

    /// Topics are equal when their names are equal byte for byte (not merely canonically equivalent).
    public static func == (lhs: Topic, rhs: Topic) -> Bool { lhs.name.sameBytes(as: rhs.name) }

    public func hash(into hasher: inout Hasher) { ByteKey(name).hash(into: &hasher) }

    /// Orders by UTF-8 bytes, which is Unicode code point order.
    public static func < (lhs: Topic, rhs: Topic) -> Bool { lhs.name.utf8.lexicographicallyPrecedes(rhs.name.utf8) }
}
