import Foundation
import NotifyBus
import Testing

/// A real `notifyd` process on a socket in its own temporary directory.
final class TestDaemon: Sendable {
    let directory: TemporaryDirectory
    let socketPath: String
    let child: ChildProcess

    /// Starts `notifyd` and waits until it says it listens.
    static func start(
        in directory: TemporaryDirectory? = nil,
        arguments: [String] = [],
        environment: [String: String]? = nil,
        namespace: String? = nil
    ) async throws -> TestDaemon {
        let daemon = try launch(in: directory ?? TemporaryDirectory(), arguments: arguments, environment: environment, namespace: namespace)
        try await daemon.waitUntilListening()
        return daemon
    }

    /// Starts `notifyd` without waiting: for tests of how it starts or fails to.
    static func launch(
        in directory: TemporaryDirectory,
        arguments: [String] = [],
        environment: [String: String]? = nil,
        namespace: String? = nil
    ) throws -> TestDaemon {
        try Binaries.checkBuilt()
        return try TestDaemon(
            directory: directory,
            socketPath: directory.path + "/notifyd.sock",
            arguments: arguments,
            environment: environment,
            namespace: namespace
        )
    }

    /// `namespace`: a network namespace to run it in (`ip netns exec`, which becomes the daemon: signals reach it).
    private init(directory: TemporaryDirectory, socketPath: String, arguments: [String], environment: [String: String]?, namespace: String?) throws {
        self.directory = directory
        self.socketPath = socketPath
        // Its own state directory and configuration file, so no test sees another's (or the machine's) state.
        let configuration = directory.path + "/notifyd.conf"
        if !FileManager.default.fileExists(atPath: configuration) {
            _ = FileManager.default.createFile(atPath: configuration, contents: Data("# test daemon\n".utf8))
        }
        let own = ["--socket", socketPath, "--state-dir", directory.path + "/state", "--config", configuration]
        if let namespace {
            child = try ChildProcess("/usr/sbin/ip", ["netns", "exec", namespace, Binaries.notifyd] + own + arguments, environment: environment)
        } else {
            child = try ChildProcess(Binaries.notifyd, own + arguments, environment: environment)
        }
    }

    var configurationPath: String { directory.path + "/notifyd.conf" }
    var stateDirectory: String { directory.path + "/state" }

    func waitUntilListening() async throws {
        try await child.standardError.wait("notifyd to listen on \(socketPath)") { $0.contains("listening") }
    }

    var log: String { child.standardError.text }

    /// Stops the daemon with SIGTERM and returns its exit status, which must be 0: a daemon that crashes or fails
    /// on its way out fails the test that stopped it, whether or not the test looks at the status.
    @discardableResult
    func stop() async throws -> Int32 {
        child.signal(SIGTERM)
        let status = try await child.exitStatus()
        // The whole log: a crash report's first lines (the reason) come long before its end.
        #expect(status == 0, "notifyd exited \(status) on SIGTERM; its log:\n\(log)")
        return status
    }

    /// Kills the daemon with SIGKILL, as a crash would, and waits until it is gone.
    func kill() async throws {
        child.signal(SIGKILL)
        _ = try await child.exitStatus()
    }

    /// A client-library connection to this daemon.
    func client() async throws -> NotifyClient {
        try await NotifyClient.connect(to: socketPath)
    }

    /// Runs `notify` against this daemon.
    func notify(_ arguments: [String], input: [UInt8]? = nil, timeout: Duration = .seconds(60)) async throws -> CommandResult {
        try await IntegrationTests.notify(arguments, socket: socketPath, input: input, timeout: timeout)
    }
}
