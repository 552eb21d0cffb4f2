import Foundation
import Testing

/// A real `notifyd-http` process in front of a ``TestDaemon``, on a free loopback port. It runs as nobody when the
/// tests run as root (the gateway refuses root), and takes requests with the token it was given (``token``).
final class TestGateway: Sendable {
    let child: ChildProcess
    let port: Int
    /// The read-write token its requests carry; nil for a gateway started with `--allow-anonymous`.
    let token: String?

    /// The uid a gateway of the tests runs as: nobody under root, else the tests' own.
    static var uid: UInt32 { getuid() == 0 ? 65534 : getuid() }

    /// `command` as the gateway's user: under `setpriv` when the tests run as root.
    static func asGatewayUser(_ command: [String]) -> [String] {
        guard getuid() == 0 else { return command }
        return ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] + command
    }

    /// Writes a token file for the gateway's user in `directory` (mode 0600, theirs) and returns its path and token.
    static func makeTokenFile(in directory: String, line: String? = nil) throws -> (path: String, token: String) {
        let token = "test-token-" + UUID().uuidString
        let path = directory + "/http-tokens-\(UUID().uuidString.prefix(8))"
        try (line ?? "read-write \(token)\n").write(toFile: path, atomically: false, encoding: .utf8)
        chmod(path, 0o600)
        chown(path, uid, uid)
        return (path, token)
    }

    /// How a test gateway takes requests.
    enum Access {
        /// With a token file the test writes (unless `arguments` name one).
        case tokenFile
        /// With `--allow-anonymous`.
        case anonymous
        /// With neither: the gateway makes its own token, under the environment's state directory.
        case ownToken
    }

    /// Starts `notifyd-http` against `daemon` and waits until it says where it listens.
    static func start(for daemon: TestDaemon, arguments: [String] = [], access: Access = .tokenFile, environment: [String: String]? = nil) async throws -> TestGateway {
        guard FileManager.default.isExecutableFile(atPath: Binaries.notifydHTTP) else {
            throw TestFailure("\(Binaries.notifydHTTP) is not built; run `swift build` first (script/test does)")
        }
        // The gateway's user reaches the daemon's socket (0666 under root) through its directory.
        chmod(daemon.directory.path, 0o755)
        var own = ["--socket", daemon.socketPath, "--listen", "127.0.0.1:0"]
        var token: String?
        if access == .anonymous {
            own.append("--allow-anonymous")
        } else if access == .tokenFile, !arguments.contains("--token-file") {
            let file = try makeTokenFile(in: daemon.directory.path)
            own += ["--token-file", file.path]
            token = file.token
        }
        let command = asGatewayUser([Binaries.notifydHTTP] + own + arguments)
        let child = try ChildProcess(command[0], Array(command.dropFirst()), environment: environment)
        try await child.standardOutput.wait("notifyd-http to listen") { $0.contains("://127.0.0.1:") && $0.contains("listening on http") }
        let text = child.standardOutput.text
        let after = text.range(of: "://127.0.0.1:")!.upperBound
        guard let port = Int(text[after...].prefix { $0.isNumber }) else { throw TestFailure("no port in: \(text)") }
        return TestGateway(child: child, port: port, token: token)
    }

    private init(child: ChildProcess, port: Int, token: String?) {
        self.child = child
        self.port = port
        self.token = token
    }

    func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    /// The token as ntfy's `?auth=` carries it: `Bearer TOKEN` in URL-safe base 64, unpadded.
    var auth: String {
        Data("Bearer \(token ?? "")".utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    /// curl's arguments that send the token, if the gateway has one.
    var authorization: [String] { token.map { ["-H", "Authorization: Bearer \($0)"] } ?? [] }

    /// Runs curl with `arguments` (and the token) and waits for it to end.
    func curl(_ arguments: [String], timeout: Duration = .seconds(30)) async throws -> CommandResult {
        try await TestGateway.curl(authorization + arguments, timeout: timeout)
    }

    /// Runs curl with `arguments` alone and waits for it to end.
    static func curl(_ arguments: [String], timeout: Duration = .seconds(30)) async throws -> CommandResult {
        let child = try ChildProcess("/usr/bin/curl", ["-sS"] + arguments)
        let status = try await child.exitStatus(timeout: timeout)
        try await child.standardOutput.wait("curl's output to end") { _ in child.standardOutput.isClosed }
        return CommandResult(status: status, stdout: child.standardOutput.bytes, stderr: child.standardError.text)
    }

    /// Starts curl (with the token) in the background: `curl -sSN ARGUMENTS`.
    func curlProcess(_ arguments: [String]) throws -> ChildProcess {
        try ChildProcess("/usr/bin/curl", ["-sSN"] + authorization + arguments)
    }

    /// Starts `curl -sN` on a stream of this gateway, in the background.
    func startStream(_ path: String) throws -> ChildProcess {
        try curlProcess([url(path)])
    }

    /// The JSON objects of `lines`, one a line.
    static func objects(_ lines: [String]) -> [[String: Any]] {
        lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    /// Stops the gateway with SIGTERM; it must exit 0.
    func stop() async throws {
        child.signal(SIGTERM)
        let status = try await child.exitStatus()
        #expect(status == 0, "notifyd-http exited \(status) on SIGTERM; its log:\n\(child.standardError.text)")
    }
}
