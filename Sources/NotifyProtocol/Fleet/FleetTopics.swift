/// The topics that cross between this host and the others in one direction: those the `export` (or `import`)
/// patterns name, never `$…` (the daemon's own) nor `user.<uid>…` (a uid means nothing on another machine), whatever
/// the patterns say.
package struct FleetTopics: Sendable, Equatable {
    package let patterns: [TopicPattern]
    /// Whether the patterns are `>`, the default: then no pattern is matched per message.
    private let all: Bool

    package init(_ patterns: [TopicPattern]) {
        self.patterns = patterns
        all = patterns.map(\.text) == [">"]
    }

    /// Topics that never leave the host nor enter it.
    package static func staysLocal(_ topic: Topic) -> Bool {
        topic.isReserved || topic.name.utf8.starts(with: "user.".utf8)
    }

    /// Whether `topic` crosses.
    package func contains(_ topic: Topic) -> Bool {
        !Self.staysLocal(topic) && (all || patterns.contains { $0.matches(topic) })
    }
}
