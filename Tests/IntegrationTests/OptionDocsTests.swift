import Foundation
import Testing

/// Every option of the commands is in the documentation (issue 50): read from what swift-argument-parser says of
/// each binary (`--experimental-dump-help`, subcommands included), looked for in docs/ and the README.
@Suite("Every option of notify, notifyd, notifyd-http and notifyd-fleet appears in the docs", .timeLimit(.minutes(2)))
struct OptionDocsTests {
    /// The long options of `binary` and its subcommands, as "command --option", but `--help` and `--version`.
    static func options(of binary: String) async throws -> [String] {
        let child = try ChildProcess(binary, ["--experimental-dump-help"])
        let status = try await child.exitStatus(timeout: .seconds(30))
        try await child.standardOutput.wait("its help to end") { _ in child.standardOutput.isClosed }
        #expect(status == 0, "\(binary) --experimental-dump-help: \(child.standardError.text)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(child.standardOutput.bytes)) as? [String: Any])
        var found: [String] = []
        func walk(_ command: [String: Any], _ path: String) {
            for argument in command["arguments"] as? [[String: Any]] ?? [] {
                for name in argument["names"] as? [[String: Any]] ?? [] where name["kind"] as? String == "long" {
                    guard let option = name["name"] as? String, option != "help", option != "version" else { continue }
                    found.append("\(path) --\(option)")
                }
            }
            for sub in command["subcommands"] as? [[String: Any]] ?? [] {
                walk(sub, path + " " + (sub["commandName"] as? String ?? "?"))
            }
        }
        walk(try #require(json["command"] as? [String: Any]), URL(fileURLWithPath: binary).lastPathComponent)
        return found
    }

    /// The text of docs/*.md and the README.
    static func documentation() throws -> String {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let docs = root.appendingPathComponent("docs")
        let pages = try FileManager.default.contentsOfDirectory(atPath: docs.path).filter { $0.hasSuffix(".md") }.map { docs.appendingPathComponent($0) }
        return try (pages + [root.appendingPathComponent("README.md")]).map { try String(contentsOf: $0, encoding: .utf8) }.joined(separator: "\n")
    }

    @Test("each long option of each command and subcommand is named in a page of docs/ or the README", arguments: ["notify", "notifyd", "notifyd-http", "notifyd-fleet"])
    func everyOptionDocumented(binary: String) async throws {
        let text = try Self.documentation()
        let options = try await Self.options(of: Binaries.directory + "/" + binary)
        #expect(options.count > 5, "\(binary): too few options read: \(options)")
        let missing = options.filter { entry in
            let option = String(entry.split(separator: " ").last ?? "")
            // The name whole: `--nats` is not found in `--nats-user`.
            return text.firstMatch(of: try! Regex("\(NSRegularExpression.escapedPattern(for: option))(?![A-Za-z0-9-])")) == nil
        }
        #expect(missing.isEmpty, "options in no page of docs/ or the README: \(missing)")
    }
}
