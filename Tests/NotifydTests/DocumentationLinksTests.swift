import Foundation
import Testing

/// The documentation's links lead somewhere: each relative link to a file or directory that exists, and a link to a
/// heading (`#anchor`, `guarantees.md#slow-subscribers`) to a heading that exists, as GitHub names it.
@Suite("The docs' links lead somewhere", .timeLimit(.minutes(3)))
struct DocumentationLinksTests {
    /// The lines of `text` outside fenced code blocks (``` or ~~~); each fenced line becomes an empty one, so what
    /// was on either side stays apart.
    static func prose(_ text: String) -> [Substring] {
        var fence: Substring?
        return text.split(separator: "\n", omittingEmptySubsequences: false).map { line in
            let trimmed = line.drop { $0 == " " || $0 == "\t" }
            let marker = trimmed.prefix { $0 == "`" || $0 == "~" }
            if let open = fence {
                if marker.count >= open.count && marker.allSatisfy({ $0 == open.first }) && trimmed.dropFirst(marker.count).allSatisfy(\.isWhitespace) {
                    fence = nil
                }
                return ""
            }
            if marker.count >= 3 && marker.allSatisfy({ $0 == marker.first }) {
                fence = marker
                return ""
            }
            return line
        }
    }

    /// The targets of the markdown links `[text](target)` in `text`, outside code blocks and code spans.
    static func links(in text: String) -> [String] {
        prose(text).joined(separator: "\n")
            .replacing(#/`(?:[^`\n]|\n(?![ \t]*\n))+`/#, with: "")
            .replacing(#/\s+/#, with: " ")
            .matches(of: #/\]\( ?<?([^)\s<>]+)>?(?: "[^"]*")? ?\)/#).map { String($0.1) }
    }

    /// The anchor GitHub gives a heading: its text lowercased, without what is neither a letter, a digit, a space, a
    /// hyphen nor an underscore (backticks and other markup included), each space a hyphen.
    static func anchor(_ heading: String) -> String {
        let text = heading.replacing(#/\[([^\]]*)\]\([^)]*\)/#) { String($0.1) }
        return String(text.lowercased().filter { $0.isLetter || $0.isNumber || $0 == " " || $0 == "-" || $0 == "_" })
            .replacing(" ", with: "-")
    }

    /// The anchors of the headings of `text`, outside code blocks; a repeated heading's get `-1`, `-2`, ….
    static func anchors(in text: String) -> Set<String> {
        var anchors: Set<String> = []
        var seen: [String: Int] = [:]
        for line in prose(text) {
            guard let heading = line.wholeMatch(of: #/ {0,3}#{1,6}(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*/#) else { continue }
            let base = anchor(String(heading.1 ?? ""))
            let count = seen[base, default: 0]
            seen[base] = count + 1
            anchors.insert(count == 0 ? base : "\(base)-\(count)")
        }
        return anchors
    }

    /// What is wrong with the relative links of `text`, the page at `page` (a path from the root): one sentence each,
    /// naming the page, the link and what is missing.
    static func brokenLinks(in text: String, page: String) throws -> [String] {
        let root = DocumentationTests.root
        var headings: [String: Set<String>] = [page: anchors(in: text)]
        var problems: [String] = []
        for link in links(in: text) where !["http://", "https://", "mailto:"].contains(where: { link.hasPrefix($0) }) {
            let parts = link.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)
            let path = String(parts[0]).removingPercentEncoding ?? String(parts[0])
            let fragment = parts.count > 1 ? String(parts[1]).removingPercentEncoding ?? String(parts[1]) : ""
            let file = path.isEmpty ? page : DocumentationTests.resolve(path, from: page)
            if file == ".." || file.hasPrefix("../") {
                problems.append("\(page) links to \(link), which is outside the package (\(file))")
                continue
            }
            var isDirectory: ObjCBool = false
            guard path.isEmpty || FileManager.default.fileExists(atPath: root.appendingPathComponent(file).path, isDirectory: &isDirectory) else {
                problems.append("\(page) links to \(link), but there is no \(file)")
                continue
            }
            guard !isDirectory.boolValue, file.hasSuffix(".md"), !fragment.isEmpty else { continue }
            if headings[file] == nil {
                headings[file] = anchors(in: try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8))
            }
            if headings[file]?.contains(fragment) != true {
                problems.append("\(page) links to \(link), but \(file) has no heading with the anchor #\(fragment)")
            }
        }
        return problems
    }

    @Test("every relative link in the README, PROTOCOL.md and docs/ leads to a file or directory that exists, and an anchor to a heading of its page", arguments: try DocumentationTests.pages())
    func linksLeadSomewhere(page: String) throws {
        let text = try String(contentsOf: DocumentationTests.root.appendingPathComponent(page), encoding: .utf8)
        for problem in try Self.brokenLinks(in: text, page: page) {
            Issue.record("\(problem)")
        }
    }

    @Test("a link to a missing file, to a missing heading or out of the package is reported; the web, files, directories and headings that exist are not")
    func brokenLinksReported() throws {
        let page = """
            # Here
            [web](https://example.com/nowhere), [mail](mailto:someone@example.com), [here](#here), [top](#),
            [a file](../Package.swift), [a directory](../Tests/), [a test](../Tests/NotifydTests/DocumentationLinksTests.swift),
            [gone](missing.md), [no such heading](#there), [no heading there](../PROTOCOL.md#no-such-heading),
            [outside](../../elsewhere.md)
            """
        let problems = try Self.brokenLinks(in: page, page: "docs/example.md")
        #expect(problems == [
            "docs/example.md links to missing.md, but there is no docs/missing.md",
            "docs/example.md links to #there, but docs/example.md has no heading with the anchor #there",
            "docs/example.md links to ../PROTOCOL.md#no-such-heading, but PROTOCOL.md has no heading with the anchor #no-such-heading",
            "docs/example.md links to ../../elsewhere.md, which is outside the package (../elsewhere.md)",
        ])
    }

    @Test("a heading's anchor is GitHub's: lowercase, markup and punctuation gone, spaces hyphens, repeats numbered")
    func anchorsAsGitHubMakesThem() {
        #expect(Self.anchor("The `notify` command") == "the-notify-command")
        #expect(Self.anchor("Exit status") == "exit-status")
        #expect(Self.anchor("Across hosts (federation)") == "across-hosts-federation")
        #expect(Self.anchor("Resuming: SUB … since=") == "resuming-sub--since")
        #expect(Self.anchor("The [NotifyBus](Sources/NotifyBus) library") == "the-notifybus-library")
        let page = "# notifyd\n## The `notify` command\n### Exit status ###\n```sh\n# not a heading\n```\n### Exit status\n## Limits\n"
        #expect(Self.anchors(in: page) == ["notifyd", "the-notify-command", "exit-status", "exit-status-1", "limits"])
    }

    @Test("links are read from prose, not from code blocks or code spans, and a title or line break inside one is allowed")
    func linksFromProse() {
        let page = """
            See [Where the socket
            is](#where-the-socket-is) and [the protocol](PROTOCOL.md "wire") and `[not](a-link)`.
            ```
            [nor](this)
            ```
            ![a picture](docs/picture.png)
            """
        #expect(Self.links(in: page) == ["#where-the-socket-is", "PROTOCOL.md", "docs/picture.png"])
    }
}
