import Testing

@testable import NotifyProtocol
import TestSupport

@Suite("Subscription index", .timeLimit(.minutes(3)))
struct SubscriptionIndexTests {
    /// The reference: match token lists recursively, written independently of the index and of
    /// `TopicPattern.matches`.
    static func bruteForceMatches(pattern p: [String], topic t: [String]) -> Bool {
        if t[0].hasPrefix("$") && (p[0] == "*" || p[0] == ">") { return false }
        func match(_ i: Int, _ j: Int) -> Bool {
            if i == p.count { return j == t.count }
            if p[i] == ">" { return j < t.count }
            if j == t.count { return false }
            return (p[i] == "*" || p[i].utf8.elementsEqual(t[j].utf8)) && match(i + 1, j + 1)
        }
        return match(0, 0)
    }

    /// Split at `.` bytes, as the protocol defines tokens (not at `.` characters: see the combining-mark tokens below).
    static func tokens(_ name: String) -> [String] {
        name.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
    }

    static func randomTopic(_ random: inout SeededRandom) -> String {
        let tokens = ["a", "b", "c", "dd", "é", "x1", "\u{301}x", "\u{200D}"]
        var parts = (0..<Int.random(in: 1...5, using: &random)).map { _ in tokens.randomElement(using: &random)! }
        if Int.random(in: 0..<10, using: &random) == 0 { parts[0] = "$sys" }
        return parts.joined(separator: ".")
    }

    static func randomPattern(_ random: inout SeededRandom) -> String {
        let tokens = ["a", "b", "c", "dd", "é", "x1", "\u{301}x", "\u{200D}", "*", "*"]
        var parts = (0..<Int.random(in: 1...5, using: &random)).map { _ in tokens.randomElement(using: &random)! }
        if Int.random(in: 0..<3, using: &random) == 0 { parts[parts.count - 1] = ">" }
        if Int.random(in: 0..<12, using: &random) == 0 { parts[0] = "$sys" }
        return parts.joined(separator: ".")
    }

    @Test("a token that starts with a combining mark is a token: the index and the pattern split at the dot byte alike")
    func combiningMarkAfterDot() throws {
        let index = SubscriptionIndex<String>()
        for text in ["backup.>", "a.\u{301}.*", "a.*.b", "x.\u{200D}y"] { index.insert(text, for: try TopicPattern(text)) }
        let cases: [(topic: String, expected: Set<String>)] = [
            ("backup.\u{301}x", ["backup.>"]),
            ("a.\u{301}.b", ["a.\u{301}.*", "a.*.b"]),
            ("a.\u{301}", []),
            ("x.\u{200D}y", ["x.\u{200D}y"]),
        ]
        for (name, expected) in cases {
            let topic = try Topic(name)
            #expect(Set(index.matches(of: topic)) == expected, "index, topic \(name.unicodeScalars.map(\.value))")
            let viaPatterns = Set(["backup.>", "a.\u{301}.*", "a.*.b", "x.\u{200D}y"].filter { try! TopicPattern($0).matches(topic) })
            #expect(viaPatterns == expected, "TopicPattern.matches, topic \(name.unicodeScalars.map(\.value))")
        }
        #expect(try Topic("a.\u{301}b").tokens.count == 2)
        #expect(try TopicPattern("a.\u{301}.*").tokens.count == 3)
    }

    @Test("matches exactly what a brute-force matcher matches, through inserts and removals")
    func agreesWithBruteForce() throws {
        var random = SeededRandom(seed: SeededRandom.seed(default: 20_261_122))
        let index = SubscriptionIndex<Int>()
        struct Registration {
            let text: String
            let pattern: TopicPattern
            let tokens: [String]
            let subscriber: Int
        }
        var registered: [Registration] = []

        for round in 0..<20 {
            // Grow, then shrink, so removal and pruning are exercised as much as insertion.
            let growing = round < 12
            for _ in 0..<60 {
                if growing || registered.isEmpty || Bool.random(using: &random) && registered.count < 400 {
                    let text = Self.randomPattern(&random)
                    let pattern = try TopicPattern(text)
                    let subscriber = Int.random(in: 0..<50, using: &random)
                    let isNew = !registered.contains { $0.text == text && $0.subscriber == subscriber }
                    #expect(index.insert(subscriber, for: pattern) == isNew)
                    if isNew { registered.append(Registration(text: text, pattern: pattern, tokens: Self.tokens(text), subscriber: subscriber)) }
                } else {
                    let victim = registered.remove(at: Int.random(in: 0..<registered.count, using: &random))
                    #expect(index.remove(victim.subscriber, for: victim.pattern))
                    #expect(!index.remove(victim.subscriber, for: victim.pattern))
                }
            }
            #expect(index.count == registered.count)
            for _ in 0..<100 {
                let name = Self.randomTopic(&random)
                let topic = try Topic(name)
                let topicTokens = Self.tokens(name)
                let expected = registered.filter { Self.bruteForceMatches(pattern: $0.tokens, topic: topicTokens) }
                    .map(\.subscriber).sorted()
                let actual = index.matches(of: topic).sorted()
                #expect(actual == expected, "topic \(name)")
                let viaPatterns = registered.filter { $0.pattern.matches(topic) }.map(\.subscriber).sorted()
                #expect(viaPatterns == expected, "TopicPattern.matches disagrees for \(name)")
            }
        }
        for registration in registered {
            #expect(index.remove(registration.subscriber, for: registration.pattern))
        }
        #expect(index.isEmpty)
        #expect(index.storageCount == 0, "empty entries and trie nodes must be freed")
        #expect(index.matches(of: try Topic("a.b")).isEmpty)
    }

    @Test("a name subscribed to once holds its subscriber inline; a second makes a set, and one left goes back inline")
    func oneSubscriberInline() throws {
        let index = SubscriptionIndex<String>()
        let pattern = try TopicPattern("a.b")
        func entry() -> SubscriberSet<String>? { index.exact[ByteKey("a.b")] }
        #expect(index.insert("s", for: pattern))
        guard case .one("s")? = entry() else { Issue.record("\(String(describing: entry()))"); return }
        #expect(!index.insert("s", for: pattern))
        #expect(index.insert("t", for: pattern))
        #expect(index.insert("u", for: pattern))
        guard case .many(let all)? = entry() else { Issue.record("\(String(describing: entry()))"); return }
        #expect(all == ["s", "t", "u"])
        #expect(!index.insert("t", for: pattern))
        #expect(index.remove("s", for: pattern))
        #expect(!index.remove("s", for: pattern))
        #expect(index.remove("u", for: pattern))
        guard case .one("t")? = entry() else { Issue.record("\(String(describing: entry()))"); return }
        #expect(index.matches(of: try Topic("a.b")) == ["t"])
        #expect(!index.remove("s", for: pattern))
        #expect(index.remove("t", for: pattern))
        #expect(entry() == nil)
        #expect(index.isEmpty && index.storageCount == 0)
    }

    @Test("a subscriber under two matching patterns is reported once per pattern")
    func perRegistration() throws {
        let index = SubscriptionIndex<String>()
        index.insert("s", for: try TopicPattern("a.*"))
        index.insert("s", for: try TopicPattern("a.>"))
        index.insert("s", for: try TopicPattern("a.b"))
        index.insert("t", for: try TopicPattern(">"))
        #expect(index.matches(of: try Topic("a.b")).sorted() == ["s", "s", "s", "t"])
        #expect(index.matches(of: try Topic("$sys.a")).isEmpty)
    }
}
