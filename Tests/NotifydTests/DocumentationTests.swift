import Foundation
import Testing

/// The README and PROTOCOL.md name the test that holds each promise they make. These checks keep the names true:
/// a test renamed, moved or deleted fails here, not in a reader's hands.
@Suite("The docs name tests that exist", .timeLimit(.minutes(3)))
struct DocumentationTests {
    /// The package's root, from this file's place in it.
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func text(_ name: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(name), encoding: .utf8)
            .replacing(#/\s+/#, with: " ")
    }

    /// Every test source under `Tests/`, by its name without `.swift` (two files may share a name).
    static func testSources() throws -> [String: [String]] {
        var sources: [String: [String]] = [:]
        let tests = root.appendingPathComponent("Tests")
        let walker = FileManager.default.enumerator(atPath: tests.path)
        while let path = walker?.nextObject() as? String {
            guard path.hasSuffix(".swift") else { continue }
            let name = String((path as NSString).lastPathComponent.dropLast(6))
            sources[name, default: []].append("Tests/" + path)
        }
        return sources
    }

    /// The titles of the tests and suites in `path`, whitespace folded.
    static func titles(in path: String) throws -> [String] {
        let source = try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
        return source.matches(of: #/@(?:Test|Suite)\(\s*"((?:[^"\\]|\\.)*)"/#).map {
            String($0.1).replacing("\\\"", with: "\"").replacing(#/\s+/#, with: " ")
        }
    }

    /// Whether a title as the docs quote it (shortened with `…` at either end or inside) is `title`.
    static func quote(_ quote: String, names title: String) -> Bool {
        let parts = quote.split(separator: "…").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        var rest = title[...]
        for (index, part) in parts.enumerated() {
            guard let found = rest.range(of: part) else { return false }
            if index == 0 && !quote.hasPrefix("…") && found.lowerBound != title.startIndex { return false }
            rest = rest[found.upperBound...]
        }
        return !parts.isEmpty
    }

    @Test("every Tests/… file the README and PROTOCOL.md link to exists", arguments: ["README.md", "PROTOCOL.md"])
    func linkedFilesExist(document: String) throws {
        let links = try Self.text(document).matches(of: #/\]\((Tests/[^)\s]+\.swift)\)/#).map { String($0.1) }
        #expect(!links.isEmpty, "\(document) names its tests")
        for link in Set(links) {
            #expect(FileManager.default.fileExists(atPath: Self.root.appendingPathComponent(link).path), "\(document) links to \(link)")
        }
    }

    @Test("every test title the README and PROTOCOL.md quote after a test's name is a test of that name", arguments: ["README.md", "PROTOCOL.md"])
    func quotedTitlesExist(document: String) throws {
        let sources = try Self.testSources()
        let citation = #/\b(\w+Tests)\b(?:\]\((Tests/[^)]+?\.swift)\))?((?::| \(|,)? ?(?:"[^"]+"(?:, | and |; |,| or )?)+)/#
        var checked = 0
        for match in try Self.text(document).matches(of: citation) {
            let files = match.2.map { [String($0)] } ?? sources[String(match.1)] ?? []
            #expect(!files.isEmpty, "\(document) cites \(match.1), which is no test file")
            let titles = try files.flatMap { try Self.titles(in: $0) }
            for quoted in match.3.matches(of: #/"([^"]+)"/#).map({ String($0.1) }) {
                checked += 1
                #expect(titles.contains { Self.quote(quoted, names: $0) }, "\(document) quotes \"\(quoted)\" from \(match.1)")
            }
        }
        if document == "README.md" { #expect(checked > 50, "the README's guarantees quote their tests") }
    }

    @Test("a quote names a title with … for what it leaves out, and nothing else")
    func quoteMatching() {
        #expect(Self.quote("a publish on A reaches B's subscriber once…", names: "a publish on A reaches B's subscriber once, with A's host"))
        #expect(Self.quote("…its own deliveries and drops add up", names: "a stalled reader: its own deliveries and drops add up"))
        #expect(Self.quote("rules: …explain names the rule…", names: "rules: a group rule admits; explain names the rule that decides"))
        #expect(!Self.quote("a publish on B…", names: "a publish on A reaches B"))
        #expect(!Self.quote("reaches B…", names: "a publish on A reaches B"), "a quote without a leading … starts where the title does")
    }
}
