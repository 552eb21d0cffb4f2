import NotifyProtocol
import Testing

@testable import NotifyFleet

/// Which topic a subject read from NATS names here, and the bound on what is remembered, without a server.
@Suite("Subject to topic cache: the import patterns, the prefix, the bound", .timeLimit(.minutes(1)))
struct SubjectTopicCacheTests {
    static func cache(importing patterns: [String]) -> SubjectTopicCache {
        SubjectTopicCache(imports: FleetTopics(patterns.map { try! TopicPattern($0) }))
    }

    @Test("a subject under the prefix names its topic when the import patterns select it; any other is nil, asked again or not")
    func answers() {
        var cache = Self.cache(importing: ["alerts.>"])
        for _ in 0..<2 {
            #expect(cache.topic(of: "fleet.alerts.disk", prefix: "fleet.")?.name == "alerts.disk")
            #expect(cache.topic(of: "fleet.metrics.cpu", prefix: "fleet.") == nil, "not imported")
            #expect(cache.topic(of: "other.alerts.disk", prefix: "fleet.") == nil, "another prefix")
            #expect(cache.topic(of: "fleet.", prefix: "fleet.") == nil, "no topic at all")
        }
        #expect(cache.count == 4, "each subject is checked once, its answer kept, nil ones too")
        // The same subject under another prefix (the stream of latest messages has its own) is another question.
        #expect(cache.topic(of: "fleet-latest.alerts.disk", prefix: "fleet-latest.")?.name == "alerts.disk")
    }

    @Test("once it holds its limit of subjects, the next one empties it: subjects from other hosts do not grow it without end")
    func bounded() {
        var cache = Self.cache(importing: [">"])
        for index in 0..<SubjectTopicCache.limit {
            _ = cache.topic(of: "fleet.t\(index)", prefix: "fleet.")
        }
        #expect(cache.count == SubjectTopicCache.limit)
        #expect(cache.topic(of: "fleet.one-more", prefix: "fleet.")?.name == "one-more")
        #expect(cache.count == 1)
        #expect(cache.topic(of: "fleet.t0", prefix: "fleet.")?.name == "t0", "a subject let go of is checked again")
    }
}
