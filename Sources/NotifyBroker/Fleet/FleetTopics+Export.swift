package import NotifyProtocol

/// Which local publishes the fleet service is handed: the followed patterns' topics that user `nobody` may read.
extension FleetTopics {
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
