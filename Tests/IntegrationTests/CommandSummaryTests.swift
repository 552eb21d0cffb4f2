import Foundation
import Testing

/// The README's summary of `notify` and the real `notify --help` name the same subcommands: one added, renamed or
/// removed on either side fails here.
@Suite("The README's summary of notify", .timeLimit(.minutes(3)))
struct CommandSummaryTests {
    /// The package's root, from this file's place in it.
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The subcommands in the `SUBCOMMANDS:` section of `notify --help`: each on a line of its own, two spaces in,
    /// maybe followed by `(default)`; `help` left out.
    static func subcommands(inHelp help: String) -> Set<String> {
        var names: Set<String> = []
        var inSection = false
        for line in help.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("SUBCOMMANDS:") {
                inSection = true
            } else if inSection, let first = line.first, !first.isWhitespace {
                break  // the next section
            } else if inSection, let entry = line.wholeMatch(of: #/  ([a-z][a-z0-9-]*)(?: \(default\))?(?: {2,}.*)?/#), entry.1 != "help" {
                names.insert(String(entry.1))
            }
        }
        return names
    }

    /// The subcommands of the table in the README's section "## The `notify` command" (up to the next `## `
    /// heading): the rows whose first cell is a code span `notify NAME …`.
    static func subcommands(inReadme readme: String) -> Set<String> {
        var names: Set<String> = []
        var inSection = false
        var inCode = false
        for line in readme.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("```") { inCode.toggle() }
            if inCode { continue }
            if line.starts(with: "## ") || line.starts(with: "# ") {
                inSection = line.trimmingCharacters(in: .whitespaces) == "## The `notify` command"
            } else if inSection, let row = line.prefixMatch(of: #/\|\s*`notify ([a-z][a-z0-9-]*)[ `]/#) {
                names.insert(String(row.1))
            }
        }
        return names
    }

    @Test("the README's table of notify commands lists exactly the subcommands of notify --help")
    func readmeListsTheSubcommands() async throws {
        try Binaries.checkBuilt()
        let child = try ChildProcess(Binaries.notify, ["--help"])
        #expect(try await child.exitStatus() == 0)
        try await child.standardOutput.wait("notify --help's output to end") { _ in child.standardOutput.isClosed }
        let help = Self.subcommands(inHelp: child.standardOutput.text)
        #expect(!help.isEmpty, "notify --help lists its subcommands under SUBCOMMANDS:; it printed:\n\(child.standardOutput.text)")

        let readme = Self.subcommands(inReadme: try String(contentsOf: Self.root.appendingPathComponent("README.md"), encoding: .utf8))
        #expect(help.subtracting(readme).isEmpty, "missing from the README's table under ## The `notify` command: \(help.subtracting(readme).sorted())")
        #expect(readme.subtracting(help).isEmpty, "in the README's table but not in notify --help: \(readme.subtracting(help).sorted())")
    }

    @Test("subcommands are read from the SUBCOMMANDS: section of --help and from the rows of the README's notify table")
    func parsing() {
        let help = """
            USAGE: notify [--socket <path>] <subcommand>

            OPTIONS:
              --socket <path>         The daemon's socket.

            SUBCOMMANDS:
              send (default)          Publish a message to a topic.
              subscribe               Print the messages published to topics matching the
                                      patterns, as they come.
              a-very-long-subcommand-name
                                      Its description on a line of its own.
              help                    Show subcommand help information.

              See 'notify help <subcommand>' for detailed help.
            """
        #expect(Self.subcommands(inHelp: help) == ["send", "subscribe", "a-very-long-subcommand-name"])

        let readme = """
            # notifyd

            | `notify send` | not in the section |

            ## The `notify` command

            | command | what it does |
            |---|---|
            | `notify send TOPIC [MESSAGE]` | publishes MESSAGE |
            |`notify latest TOPIC`| prints the buffered message |
            | `notify clear` | forgets it |

            ```
            | `notify fenced` | in a code block |
            ```

            ### Exit status

            | `notify stats` | still the section |

            ## The `notifyd` daemon

            | `notify topics` | another section |
            """
        #expect(Self.subcommands(inReadme: readme) == ["send", "latest", "clear", "stats"])
    }
}
