import Foundation
import NotifyBus
import Testing

/// A real `notifyd` process on a socket in its own temporary directory, and, when it is given the fleet's options
/// (`--nats…`, `--host-name`) or its file has a `[nats]` section, a real `notifyd-fleet` beside it, as the host's
/// fleet service (the daemon's fleet user is the tests' own uid).
final class TestDaemon: Sendable {
    let directory: TemporaryDirectory
    let socketPath: String
    let child: ChildProcess
    /// The fleet service, when this host is in a fleet.
    let fleet: ChildProcess?

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
        var own = ["--socket", socketPath, "--state-dir", directory.path + "/state", "--config", configuration]
        if !arguments.contains("--fleet-user") { own += ["--fleet-user", "\(getuid())"] }
        let (daemonArguments, fleetArguments) = Self.split(arguments)
        let inFleet = !fleetArguments.isEmpty || ((try? String(contentsOfFile: configuration, encoding: .utf8))?.contains("[nats]") ?? false)
        func spawn(_ binary: String, _ arguments: [String]) throws -> ChildProcess {
            if let namespace {
                return try ChildProcess("/usr/sbin/ip", ["netns", "exec", namespace, binary] + arguments, environment: environment)
            }
            return try ChildProcess(binary, arguments, environment: environment)
        }
        child = try spawn(Binaries.notifyd, own + daemonArguments)
        // The fleet service links to the daemon when it listens (it tries again until then).
        // Its state directory beside the daemon's: a host restarted in the same directory catches up from where it stood.
        let fleetState = directory.path + "/fleet-state"
        try? FileManager.default.createDirectory(atPath: fleetState, withIntermediateDirectories: true)
        fleet = inFleet
            ? try spawn(Binaries.notifydFleet, ["--socket", socketPath, "--config", configuration, "--state-dir", fleetState] + fleetArguments) : nil
    }

    /// The daemon's arguments and the fleet service's (`--nats…` and `--host-name`, each with its value).
    static func split(_ arguments: [String]) -> (daemon: [String], fleet: [String]) {
        var daemon: [String] = []
        var fleet: [String] = []
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            if argument.hasPrefix("--nats") || argument.hasPrefix("--host-name") {
                fleet.append(argument)
                if !argument.contains("="), index + 1 < arguments.count {
                    fleet.append(arguments[index + 1])
                    index += 1
                }
            } else {
                daemon.append(argument)
            }
            index += 1
        }
        return (daemon, fleet)
    }

    /// What the fleet service writes (the daemon's, when there is none): where NATS's comings and goings are said.
    var fleetLog: OutputCollector { fleet?.standardError ?? child.standardError }

    var configurationPath: String { directory.path + "/notifyd.conf" }
    var stateDirectory: String { directory.path + "/state" }

    func waitUntilListening() async throws {
        try await child.standardError.wait("notifyd to listen on \(socketPath)") { $0.contains("listening") }
    }

    /// The daemon's log, then the fleet service's.
    var log: String { child.standardError.text + (fleet.map { "\n" + $0.standardError.text } ?? "") }

    /// Stops the daemon with SIGTERM and returns its exit status, which must be 0: a daemon that crashes or fails
    /// on its way out fails the test that stopped it, whether or not the test looks at the status.
    @discardableResult
    func stop() async throws -> Int32 {
        if let fleet {
            fleet.signal(SIGTERM)
            let status = try await fleet.exitStatus()
            #expect(status == 0, "notifyd-fleet exited \(status) on SIGTERM; its log:\n\(fleet.standardError.text)")
        }
        child.signal(SIGTERM)
        let status = try await child.exitStatus()
        // The whole log: a crash report's first lines (the reason) come long before its end.
        #expect(status == 0, "notifyd exited \(status) on SIGTERM; its log:\n\(log)")
        return status
    }

    /// Kills the daemon with SIGKILL, as a crash would, and waits until it is gone.
    func kill() async throws {
        fleet?.signal(SIGKILL)
        child.signal(SIGKILL)
        _ = try await child.exitStatus()
        _ = try await fleet?.exitStatus()
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
