import Foundation
import Testing

/// A real `notifyd-http` process in front of a ``TestDaemon``, on a free loopback port.
final class TestGateway: Sendable {
    let child: ChildProcess
    let port: Int

    /// Starts `notifyd-http` against `daemon` and waits until it says where it listens.
    static func start(for daemon: TestDaemon, arguments: [String] = []) async throws -> TestGateway {
        guard FileManager.default.isExecutableFile(atPath: Binaries.notifydHTTP) else {
            throw TestFailure("\(Binaries.notifydHTTP) is not built; run `swift build` first (script/test does)")
        }
        let child = try ChildProcess(Binaries.notifydHTTP, ["--socket", daemon.socketPath, "--listen", "127.0.0.1:0"] + arguments)
        try await child.standardOutput.wait("notifyd-http to listen") { $0.contains("listening on http://127.0.0.1:") }
        let text = child.standardOutput.text
        let after = text.range(of: "http://127.0.0.1:")!.upperBound
        guard let port = Int(text[after...].prefix { $0.isNumber }) else { throw TestFailure("no port in: \(text)") }
        return TestGateway(child: child, port: port)
    }

    private init(child: ChildProcess, port: Int) {
        self.child = child
        self.port = port
    }

    func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    /// Runs curl with `arguments` and waits for it to end.
    func curl(_ arguments: [String], timeout: Duration = .seconds(30)) async throws -> CommandResult {
        let child = try ChildProcess("/usr/bin/curl", ["-sS"] + arguments)
        let status = try await child.exitStatus(timeout: timeout)
        try await child.standardOutput.wait("curl's output to end") { _ in child.standardOutput.isClosed }
        return CommandResult(status: status, stdout: child.standardOutput.bytes, stderr: child.standardError.text)
    }

    /// Starts `curl -sN` on a stream of this gateway, in the background.
    func startStream(_ path: String) throws -> ChildProcess {
        try ChildProcess("/usr/bin/curl", ["-sSN", url(path)])
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
