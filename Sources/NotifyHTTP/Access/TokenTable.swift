import Foundation

/// The bearer tokens a gateway takes (`--token-file`): one a line, `read-only TOKEN` or `read-write TOKEN`; blank
/// lines and `#` comments are skipped. With a table, every request carries `Authorization: Bearer TOKEN`; a read-only
/// token reads (streams, `latest`), a read-write one publishes too.
public struct TokenTable: Sendable {
    /// What a token allows.
    public enum Permission: Sendable, Equatable {
        case readOnly
        case readWrite
    }

    /// The shortest token taken: a short one could be guessed.
    public static let shortestToken = 16

    private let tokens: [(token: [UInt8], permission: Permission)]

    /// Reads the table from `text` (the file's contents); `path` names it in errors.
    public init(parsing text: String, path: String) throws {
        var tokens: [(token: [UInt8], permission: Permission)] = []
        for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\r" })
            guard let first = words.first, !first.hasPrefix("#") else { continue }
            let permission: Permission
            switch first {
            case "read-only": permission = .readOnly
            case "read-write": permission = .readWrite
            default:
                throw TokenTable.Problem("\(path):\(number + 1): a line is `read-only TOKEN` or `read-write TOKEN`, not `\(first.prefix(20))…`")
            }
            guard words.count == 2 else {
                throw TokenTable.Problem("\(path):\(number + 1): one token after \(first), nothing else")
            }
            guard words[1].utf8.count >= TokenTable.shortestToken else {
                throw TokenTable.Problem("\(path):\(number + 1): a token has at least \(TokenTable.shortestToken) characters (a random one: openssl rand -hex 24)")
            }
            tokens.append((Array(words[1].utf8), permission))
        }
        guard !tokens.isEmpty else { throw TokenTable.Problem("\(path) holds no token") }
        self.tokens = tokens
    }

    /// Reads the table from the file at `path`.
    public init(contentsOf path: String) throws {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw TokenTable.Problem("cannot read the token file \(path): \(error.localizedDescription)")
        }
        try self.init(parsing: text, path: path)
    }

    /// What `token` allows, if it is one of the table's. Every token is compared whole, whichever matches, so that
    /// the time taken tells nothing of how much of a guess was right.
    func permission(of token: Substring) -> Permission? {
        let presented = Array(token.utf8)
        var found: Permission?
        for entry in tokens {
            var difference = UInt8(truncatingIfNeeded: entry.token.count ^ presented.count)
            for index in entry.token.indices {
                difference |= entry.token[index] ^ (index < presented.count ? presented[index] : 0)
            }
            if difference == 0 { found = entry.permission }
        }
        return found
    }

    /// A token file that cannot be used, said in a sentence.
    public struct Problem: Error, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }
}
