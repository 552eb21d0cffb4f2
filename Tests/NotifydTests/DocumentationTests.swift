import Foundation
import Testing

/// The documentation names the test that holds each promise it makes. These checks keep the names true: a test
/// renamed, moved or deleted fails here, not in a reader's hands.
@Suite("The docs name tests that exist", .timeLimit(.minutes(3)))
struct DocumentationTests {
    /// The package's root, from this file's place in it.
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Every page of the documentation, by its path from the root: README.md, PROTOCOL.md and each `docs/*.md` as
    /// the directory holds them when the tests run, so a new page is checked without being named here.
    static func pages() throws -> [String] {
        let docs = root.appendingPathComponent("docs").path
        guard FileManager.default.fileExists(atPath: docs) else { return ["README.md", "PROTOCOL.md"] }
        let names = try FileManager.default.contentsOfDirectory(atPath: docs).filter { $0.hasSuffix(".md") }.sorted()
        return ["README.md", "PROTOCOL.md"] + names.map { "docs/" + $0 }
    }

    /// The page at `page` (a path from the root), whitespace folded.
    static func text(_ page: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(page), encoding: .utf8)
            .replacing(#/\s+/#, with: " ")
    }

    /// The path from the root that `target`, a relative link on `page`, names: relative to the page's directory,
    /// or to the root when it starts with `/`. A path that climbs out of the root starts with `..`.
    static func resolve(_ target: String, from page: String) -> String {
        var parts = target.hasPrefix("/") ? [] : page.split(separator: "/").dropLast().map(String.init)
        for part in target.split(separator: "/") {
            switch part {
            case ".": continue
            case "..": if let last = parts.last, last != ".." { parts.removeLast() } else { parts.append("..") }
            default: parts.append(String(part))
            }
        }
        return parts.joined(separator: "/")
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

    /// The test files `page` links to (`](Tests/….swift)`, or `](../Tests/….swift)` from `docs/`), as written.
    static func linkedTestFiles(in page: String) throws -> Set<String> {
        Set(try text(page).matches(of: #/\]\(((?:\.\./)*Tests/[^)\s]+\.swift)\)/#).map { String($0.1) })
    }

    /// A test named on a page, with the titles quoted after its name.
    struct Citation {
        /// The test's name as written: `BrokerTests`.
        let test: String
        /// The files it may be in, from the root: the one linked, else every test file of that name.
        let files: [String]
        let quotes: [String]
    }

    /// The tests `page` names with titles after them: `BrokerTests: "…"`, `[BrokerTests](../Tests/…) ("…", "…")`.
    static func citations(in page: String, sources: [String: [String]]) throws -> [Citation] {
        let citation = #/\b(\w+Tests)\b(?:\]\(((?:\.\./)*Tests/[^)]+?\.swift)\))?((?::| \(|,)? ?(?:"[^"]+"(?:, | and |; |,| or )?)+)/#
        return try text(page).matches(of: citation).map { match in
            let files = match.2.map { [resolve(String($0), from: page)] } ?? sources[String(match.1)] ?? []
            return Citation(test: String(match.1), files: files, quotes: match.3.matches(of: #/"([^"]+)"/#).map { String($0.1) })
        }
    }

    @Test("every Tests/… file the README, PROTOCOL.md and docs/ link to exists", arguments: try pages())
    func linkedFilesExist(page: String) throws {
        for link in try Self.linkedTestFiles(in: page) {
            let file = Self.resolve(link, from: page)
            #expect(FileManager.default.fileExists(atPath: Self.root.appendingPathComponent(file).path), "\(page) links to \(link), which is not \(file)")
        }
    }

    @Test("every test title the README, PROTOCOL.md and docs/ quote after a test's name is a test of that name", arguments: try pages())
    func quotedTitlesExist(page: String) throws {
        let sources = try Self.testSources()
        for citation in try Self.citations(in: page, sources: sources) {
            #expect(!citation.files.isEmpty, "\(page) cites \(citation.test), which is no test file")
            let titles = try citation.files.filter { FileManager.default.fileExists(atPath: Self.root.appendingPathComponent($0).path) }
                .flatMap { try Self.titles(in: $0) }
            for quoted in citation.quotes {
                #expect(titles.contains { Self.quote(quoted, names: $0) }, "\(page) quotes \"\(quoted)\" from \(citation.test)")
            }
        }
    }

    @Test("the pages together quote more than 50 test titles: the guarantees name their tests")
    func guaranteesQuoteTheirTests() throws {
        let sources = try Self.testSources()
        let pages = try Self.pages()
        let quoted = try pages.map { try Self.citations(in: $0, sources: sources).map(\.quotes.count).reduce(0, +) }
        let counts = zip(pages, quoted).map { "\($0) \($1)" }.joined(separator: ", ")
        #expect(quoted.reduce(0, +) > 50, "the pages quote \(quoted.reduce(0, +)) titles in all (\(counts))")
    }

    @Test("a quote names a title with … for what it leaves out, and nothing else")
    func quoteMatching() {
        #expect(Self.quote("a publish on A reaches B's subscriber once…", names: "a publish on A reaches B's subscriber once, with A's host"))
        #expect(Self.quote("…its own deliveries and drops add up", names: "a stalled reader: its own deliveries and drops add up"))
        #expect(Self.quote("rules: …explain names the rule…", names: "rules: a group rule admits; explain names the rule that decides"))
        #expect(!Self.quote("a publish on B…", names: "a publish on A reaches B"))
        #expect(!Self.quote("reaches B…", names: "a publish on A reaches B"), "a quote without a leading … starts where the title does")
    }

    @Test("a link resolves against its page's directory: ../ climbs, / starts at the root")
    func linkResolution() {
        #expect(Self.resolve("../Tests/NotifyBrokerTests/BrokerTests.swift", from: "docs/guarantees.md") == "Tests/NotifyBrokerTests/BrokerTests.swift")
        #expect(Self.resolve("Tests/NotifyBrokerTests/BrokerTests.swift", from: "README.md") == "Tests/NotifyBrokerTests/BrokerTests.swift")
        #expect(Self.resolve("./limits.md", from: "docs/guarantees.md") == "docs/limits.md")
        #expect(Self.resolve("/PROTOCOL.md", from: "docs/guarantees.md") == "PROTOCOL.md")
        #expect(Self.resolve("../Tests/X.swift", from: "README.md") == "../Tests/X.swift", "out of the root")
    }
}
