package import NotifyProtocol


/// The topics that cross between this host and the others in one direction: those the `export` (or `import`)
/// patterns name, never `$…` (the daemon's own) nor `user.<uid>…` (a uid means nothing on another machine), whatever
/// the patterns say.
package struct FederatedTopics: Sendable, Equatable {
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

    /// What becomes of a local publish of `topic`.
    package enum ExportDecision: Equatable {
        case export
        /// Not one of the topics that cross.
        case notSelected
        /// One of them, but `reader` may not read it here: every client of the NATS server would read it there.
        case notReadable
    }

    /// Whether a local publish of `topic` is exported, as these are the export patterns and `reader` (`nobody`) is
    /// whom exports are read as.
    package func exportDecision(for topic: Topic, policy: AccessPolicy, reader: PeerCredentials) -> ExportDecision {
        guard contains(topic) else { return .notSelected }
        return policy.allows(.read, topic: topic, peer: reader) ? .export : .notReadable
    }
}
