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

    /// Reads the table from the file at `path`, which others may neither read nor change, and group members may not
    /// change (0600, or 0640 with the gateway's group).
    public init(contentsOf path: String) throws {
        try TokenTable.checkPrivate(path, what: "token file")
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw TokenTable.Problem("cannot read the token file \(path): \(error.localizedDescription)")
        }
        try self.init(parsing: text, path: path)
    }

    /// Refuses a file of secrets (`what`) that others may read, or group members or others change.
    static func checkPrivate(_ path: String, what: String) throws {
        var status = stat()
        guard stat(path, &status) == 0 else {
            throw TokenTable.Problem("cannot read the \(what) \(path): \(String(cString: strerror(errno)))")
        }
        // A file of secrets is a small regular file: not a device or a pipe that would be read for ever.
        guard status.st_mode & S_IFMT == S_IFREG, status.st_size <= 1 << 20 else {
            throw TokenTable.Problem("the \(what) \(path) is not a regular file of at most 1 MiB")
        }
        let mode = status.st_mode & 0o777
        guard mode & 0o026 == 0 else {
            throw TokenTable.Problem(
                "the \(what) \(path) may be read or changed by other users (mode \(String(mode, radix: 8))): it must stay its owner's (chmod 600 \(path), or 640 with the gateway's group)"
            )
        }
    }

    /// Reads the table at `path`, or makes it first with one new read-write token (mode 0600, in a directory only its
    /// owner may enter): the gateway's own token when none is given, so that loopback is not anonymous.
    /// - Returns: the table, and whether it was made now.
    public static func loadOrMake(at path: String) throws -> (table: TokenTable, made: Bool) {
        if access(path, F_OK) == 0 { return (try TokenTable(contentsOf: path), false) }
        let directory = (path as NSString).deletingLastPathComponent
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw TokenTable.Problem("cannot make \(directory) for the gateway's token: \(error.localizedDescription)")
        }
        var generator = SystemRandomNumberGenerator()
        let token = (0..<3).map { _ in String(generator.next() as UInt64, radix: 16).leftPadded(to: 16) }.joined()
        let text = "# notifyd-http's token, made at its first start: send it as Authorization: Bearer TOKEN.\nread-write \(token)\n"
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            // Made by another gateway a moment ago: take that one.
            if errno == EEXIST { return (try TokenTable(contentsOf: path), false) }
            throw TokenTable.Problem("cannot make the token file \(path): \(String(cString: strerror(errno)))")
        }
        let written = text.utf8CString.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count - 1) }
        let synced = fsync(descriptor) == 0
        close(descriptor)
        guard written == text.utf8.count, synced else {
            unlink(path)
            throw TokenTable.Problem("cannot write the token file \(path)")
        }
        return (try TokenTable(parsing: text, path: path), true)
    }

    /// What `token` allows, if it is one of the table's. Every token is compared whole, whichever matches, so that
    /// the time taken tells nothing of how much of a guess was right.
    func permission(of token: Substring) -> Permission? {
        let presented = Array(token.utf8)
        var found: Permission?
        for entry in tokens {
            // A length that differs is a mismatch whatever the bytes (a token with bytes after it is not the token).
            var difference: UInt8 = entry.token.count == presented.count ? 0 : 1
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

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
