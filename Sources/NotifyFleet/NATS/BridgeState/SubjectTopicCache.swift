import NotifyProtocol

/// Which topic each subject read from NATS names here, when it is one this host takes in: a host's messages come
/// under a few subjects again and again, and a topic made and checked anew for each was a fifth of what taking one
/// in cost, so each distinct subject is checked once.
///
/// It holds the import patterns its answers come from: other patterns are another cache, so answers of the old ones
/// never outlive a reload. Bounded: emptied whole when it holds ``limit`` subjects, since subjects come from other
/// hosts and must not grow this host's memory without end.
struct SubjectTopicCache {
    static let limit = 4_096

    private let imports: FleetTopics
    /// subject → its topic here, or nil when this host does not take it in.
    private var topics: [String: Topic?] = [:]
    /// The last subject looked up and its answer, asked before ``topics``.
    private var last: (subject: String, topic: Topic?)?

    init(imports: FleetTopics) {
        self.imports = imports
    }

    /// How many subjects are remembered.
    var count: Int { topics.count }

    /// The topic `subject` names under `prefix` (`<prefix>.` included), when `imports` selects it; nil otherwise.
    mutating func topic(of subject: String, prefix: String) -> Topic? {
        // The last subject first: the decoder hands the same `String` for a run of one subject, so this compare is
        // of two pointers, and no hash is computed.
        if let last, last.subject == subject { return last.topic }
        let topic = lookUp(subject, prefix: prefix)
        last = (subject, topic)
        return topic
    }

    private mutating func lookUp(_ subject: String, prefix: String) -> Topic? {
        if let known = topics[subject] { return known }
        var topic: Topic?
        if subject.utf8.starts(with: prefix.utf8), let name = String(subject.utf8.dropFirst(prefix.utf8.count)),
            let parsed = try? Topic(name), imports.contains(parsed)
        {
            topic = parsed
        }
        if topics.count >= Self.limit { topics.removeAll(keepingCapacity: true) }
        topics[subject] = .some(topic)
        return topic
    }
}
