import Configuration
import Logging
import NotifyBus
import SystemPackage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Everything the daemon is told, resolved from the command line first, then the configuration file, then the
/// defaults.
///
/// The file is YAML with the same names as the options: `log-level: debug`, `max-payload: 65536`. It is
/// `--config PATH`, else `/etc/notifyd/notifyd.conf` for root and `$XDG_CONFIG_HOME/notifyd/notifyd.conf`
/// (`~/.config/notifyd/notifyd.conf`) for other users; the default file may be missing, an explicit one may not.
/// SIGHUP reads it again (see ``reloadable(from:)``).
struct DaemonSettings: Sendable, Equatable {
    var socketPath: String
    var stateDirectory: String
    var logLevel: Logger.Level
    var syncPolicy: StateLog.SyncPolicy
    var broker: BrokerConfiguration

    /// The values given on the command line, which win over the file.
    struct Overrides: Sendable {
        var socket: String?
        var stateDirectory: String?
        var logLevel: Logger.Level?
        var syncPolicy: StateLog.SyncPolicy?
        var maxPayload: Int?
        var maxSubscriptions: Int?
        var maxTopics: Int?
    }

    /// The configuration file used: `explicit`, or the default for the user.
    static func configurationPath(explicit: String?) -> (path: String, isExplicit: Bool) {
        if let explicit { return (explicit, true) }
        if getuid() == 0 { return ("/etc/notifyd/notifyd.conf", false) }
        let home = SocketPath.processEnvironment("HOME") ?? "/"
        let base = SocketPath.processEnvironment("XDG_CONFIG_HOME").flatMap { $0.hasPrefix("/") ? $0 : nil } ?? home + "/.config"
        return (base + "/notifyd/notifyd.conf", false)
    }

    /// Reads the settings.
    /// - Throws: ``ConfigurationError`` saying which file and what is wrong with it.
    static func load(overrides: Overrides, configurationFile: String?) async throws -> DaemonSettings {
        let (path, isExplicit) = configurationPath(explicit: configurationFile)
        var values: [AbsoluteConfigKey: ConfigValue] = [:]
        func set(_ key: String, _ content: ConfigContent?) {
            if let content { values[AbsoluteConfigKey([key])] = ConfigValue(content, isSecret: false) }
        }
        set("socket", overrides.socket.map { .string($0) })
        set("state-dir", overrides.stateDirectory.map { .string($0) })
        set("log-level", overrides.logLevel.map { .string($0.rawValue) })
        set("sync", overrides.syncPolicy.map { .string($0.rawValue) })
        set("max-payload", overrides.maxPayload.map { .int($0) })
        set("max-subscriptions", overrides.maxSubscriptions.map { .int($0) })
        set("max-topics", overrides.maxTopics.map { .int($0) })

        var providers: [any ConfigProvider] = [InMemoryProvider(name: "command line", values: values)]
        // A file of comments only (or nothing) is an empty configuration, not "a YAML value that is not a mapping".
        if !DaemonSettings.isBlank(path) {
            do {
                providers.append(try await FileProvider<YAMLSnapshot>(filePath: FilePath(path), allowMissing: !isExplicit))
            } catch {
                throw ConfigurationError(path: path, problem: "\(error)")
            }
        }
        let reader = ConfigReader(providers: providers)
        return try DaemonSettings(reader: reader, path: path)
    }

    private init(reader: ConfigReader, path: String) throws {
        // The reader answers nil both for a missing key and for a value of the wrong type; a value that is there
        // but unusable must be an error, not a silent default.
        func integer(_ key: String, default value: Int, minimum: Int) throws -> Int {
            let number: Int
            if let given = reader.int(forKey: ConfigKey(key)) {
                number = given
            } else if let text = reader.string(forKey: ConfigKey(key)) {
                throw ConfigurationError(path: path, problem: "\(key) must be a whole number, not \"\(text)\"")
            } else {
                number = value
            }
            guard number >= minimum else {
                throw ConfigurationError(path: path, problem: "\(key) must be at least \(minimum), not \(number)")
            }
            return number
        }
        socketPath = SocketPath.resolve(explicit: reader.string(forKey: "socket"))
        stateDirectory = reader.string(forKey: "state-dir") ?? DaemonSettings.defaultStateDirectory()
        let levelName = reader.string(forKey: "log-level") ?? Logger.Level.info.rawValue
        guard let level = Logger.Level(rawValue: levelName) else {
            let names = Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")
            throw ConfigurationError(path: path, problem: "log-level is \"\(levelName)\"; use one of \(names)")
        }
        logLevel = level
        let syncName = reader.string(forKey: "sync") ?? StateLog.SyncPolicy.never.rawValue
        guard let policy = StateLog.SyncPolicy(rawValue: syncName) else {
            throw ConfigurationError(path: path, problem: "sync is \"\(syncName)\"; use never or always")
        }
        syncPolicy = policy
        var limits = ProtocolLimits.default
        limits.maxPayload = try integer("max-payload", default: ProtocolLimits.default.maxPayload, minimum: 0)
        broker = BrokerConfiguration(
            protocolLimits: limits,
            maxSubscriptionsPerConnection: try integer(
                "max-subscriptions",
                default: BrokerConfiguration.default.maxSubscriptionsPerConnection,
                minimum: 1
            ),
            maxTopics: try integer("max-topics", default: BrokerConfiguration.default.maxTopics, minimum: 1)
        )
    }

    /// Whether the file at `path` exists and holds nothing but blank lines and comments.
    private static func isBlank(_ path: String) -> Bool {
        guard let file = fopen(path, "r") else { return false }
        defer { fclose(file) }
        var line: UnsafeMutablePointer<CChar>?
        var capacity = 0
        defer { free(line) }
        while getline(&line, &capacity, file) >= 0 {
            let text = String(cString: line!).drop { $0 == " " || $0 == "\t" }
            if let first = text.first, first != "#", first != "\n", first != "\r" { return false }
        }
        return true
    }

    /// `$STATE_DIRECTORY` under systemd (`StateDirectory=`), else `/var/lib/notifyd` for root and
    /// `$XDG_STATE_HOME/notifyd` (`~/.local/state/notifyd`) for other users.
    static func defaultStateDirectory() -> String {
        if let fromSystemd = SocketPath.processEnvironment("STATE_DIRECTORY"), !fromSystemd.isEmpty {
            // systemd may pass several, separated by colons; the first is ours.
            return String(fromSystemd.split(separator: ":").first ?? Substring(fromSystemd))
        }
        if getuid() == 0 { return "/var/lib/notifyd" }
        let home = SocketPath.processEnvironment("HOME") ?? "/"
        let base = SocketPath.processEnvironment("XDG_STATE_HOME").flatMap { $0.hasPrefix("/") ? $0 : nil } ?? home + "/.local/state"
        return base + "/notifyd"
    }

    /// The settings a reload may change in a running daemon; the socket, the state directory and the sync policy
    /// take a restart.
    func reloadable(from newer: DaemonSettings) -> (settings: DaemonSettings, ignored: [String]) {
        var result = self
        result.logLevel = newer.logLevel
        result.broker = newer.broker
        var ignored: [String] = []
        if newer.socketPath != socketPath { ignored.append("socket") }
        if newer.stateDirectory != stateDirectory { ignored.append("state-dir") }
        if newer.syncPolicy != syncPolicy { ignored.append("sync") }
        return (result, ignored)
    }
}

/// A configuration file that cannot be used, and why.
struct ConfigurationError: Error, CustomStringConvertible {
    let path: String
    let problem: String
    var description: String { "configuration \(path): \(problem)" }
}
