import Testing

@testable import NotifyProtocol

@Suite("Topic names and patterns", .timeLimit(.minutes(3)))
struct TopicTests {
    @Test(
        "valid topics",
        arguments: ["a", "backup.nightly.done", "$notifyd.stats", "a-b_c:d/e", "caf\u{E9}.men\u{FC}", "日本.東京", "x.1.2.3",
            String(repeating: "a", count: 255)]
    )
    func validTopic(_ name: String) throws {
        let topic = try Topic(name)
        #expect(topic.name == name)
        #expect(try TopicPattern(name).isLiteral)
    }

    @Test(
        "invalid topics name the rule they break",
        arguments: [
            ("", TopicError.Reason.empty),
            (String(repeating: "a", count: 256), .tooLong(byteCount: 256, limit: 255)),
            ("a..b", .emptyToken),
            (".a", .emptyToken),
            ("a.", .emptyToken),
            ("a b", .forbiddenCharacter(" ")),
            ("a\tb", .forbiddenCharacter("\t")),
            ("a\nb", .forbiddenCharacter("\n")),
            ("a\u{7F}", .forbiddenCharacter("\u{7F}")),
            ("a\u{85}b", .forbiddenCharacter("\u{85}")),
            ("a\u{A0}b", .forbiddenCharacter("\u{A0}")),
            ("a\u{2028}b", .forbiddenCharacter("\u{2028}")),
            ("a\u{3000}b", .forbiddenCharacter("\u{3000}")),
            ("a.*", .wildcardInTopic),
            ("a.>", .wildcardInTopic),
            ("a*b", .wildcardInTopic),
        ]
    )
    func invalidTopic(_ name: String, _ reason: TopicError.Reason) {
        #expect(throws: TopicError(reason, input: name.utf8)) { try Topic(name) }
    }

    @Test(
        "invalid patterns name the rule they break",
        arguments: [
            ("a.>.b", TopicError.Reason.fullWildcardNotLast),
            (">.a", .fullWildcardNotLast),
            ("a*", .wildcardInsideToken),
            ("a.b>", .wildcardInsideToken),
            ("**", .wildcardInsideToken),
            ("a.*x.c", .wildcardInsideToken),
            ("a..*", .emptyToken),
            ("", .empty),
        ]
    )
    func invalidPattern(_ text: String, _ reason: TopicError.Reason) {
        #expect(throws: TopicError(reason, input: text.utf8)) { try TopicPattern(text) }
    }

    @Test("invalid UTF-8 is refused on the byte path the decoder uses")
    func invalidUTF8() {
        for bytes: [UInt8] in [[0x61, 0xFF], [0xC3], [0xED, 0xA0, 0x80], [0xC0, 0xAF], [0xF4, 0x90, 0x80, 0x80]] {
            let result = bytes.withUnsafeBytes { TopicSyntax.string(from: $0, kind: .topic, maxLength: 255) }
            #expect(throws: TopicError(.invalidUTF8, input: bytes)) { try result.get() }
        }
    }

    @Test("error sentences are one printable line that says what to do")
    func sentences() throws {
        let error = try #require(throws: TopicError.self) { try Topic("a\nb..c") }
        #expect(!error.description.contains("\n"))
        #expect(error.description.contains("a\\u{A}b..c"))
        #expect(error.description.contains("whitespace or control"))
        let long = try #require(throws: TopicError.self) { try Topic(String(repeating: "x", count: 5000)) }
        #expect(long.description.count < 200)
    }

    @Test("valid patterns")
    func validPatterns() throws {
        for text in ["*", ">", "a.*", "a.>", "*.b.*", "$notifyd.>", "a.*.>"] {
            #expect(try !TopicPattern(text).isLiteral)
        }
    }

    @Test("names compare byte for byte, not by Unicode equivalence")
    func byteIdentity() throws {
        let composed = try Topic("caf\u{E9}")
        let decomposed = try Topic("cafe\u{301}")
        #expect(composed.name == decomposed.name)  // Swift's String thinks so…
        #expect(composed != decomposed)  // …but they are two topics.
        #expect(Set([composed, decomposed]).count == 2)
        #expect(!TopicPattern(composed).matches(decomposed))
    }

    @Test("pattern semantics", arguments: [
        ("a.*.c", "a.b.c", true), ("a.*.c", "a.c", false), ("a.*.c", "a.b.b.c", false),
        ("a.>", "a.b", true), ("a.>", "a.b.c", true), ("a.>", "a", false),
        (">", "a", true), (">", "a.b.c", true), ("*", "a", true), ("*", "a.b", false),
        ("*.b", "a.b", true), (">", "$notifyd.x", false), ("*.x", "$notifyd.x", false),
        ("$notifyd.>", "$notifyd.x", true), ("$notifyd.*", "$notifyd.x", true), ("a.b", "a.b", true), ("a.b", "a.bc", false),
    ])
    func matching(_ pattern: String, _ topic: String, _ expected: Bool) throws {
        #expect(try TopicPattern(pattern).matches(Topic(topic)) == expected)
    }
}
