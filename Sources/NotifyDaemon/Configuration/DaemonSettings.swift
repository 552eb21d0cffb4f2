import Configuration
import ConfigurationFiles
import Logging
import NotifyProtocol
import NotifyBroker
import NotifySystem

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Everything the daemon is told, resolved from the command line first, then the configuration file, then the
/// defaults.
///
/// The file (see ``ConfigurationFile``) uses the options' names: `log-level = debug`, `max-payload = 65536`; access
/// rules go under `[rules]`, one `NAME = RULE` line each, in the order they are tried (see ``AccessRule``). It is
/// `--config PATH`, else `$CONFIGURATION_DIRECTORY/notifyd.conf` under systemd, else `/etc/notifyd/notifyd.conf`
/// for root and `$XDG_CONFIG_HOME/notifyd/notifyd.conf` (`~/.config/notifyd/notifyd.conf`) for other users; the
/// default file may be missing, an explicit one may not.
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
        var maxQueuedMessages: Int?
        var maxQueuedBytes: Int?
        var maxTopicLength: Int?
        var maxConnections: Int?
        var maxConnectionsPerUser: Int?
        var maxRetainedBytes: Int?
        var maxRetainedBytesPerUser: Int?
        var maxSubscriptionsPerUser: Int?
        var maxQueuedBytesPerUser: Int?
        var maxQueuedBytesTotal: Int?
        var maxRetainedTopicsPerUser: Int?
        var maxUnreadBytesPerUser: Int?
        var maxUnreadBytesTotal: Int?
        var historyMessages: Int?
        var historyBytes: Int?
        var fleetUser: String?
    }

    /// The configuration file used (``ConfigurationFile/path(explicit:)``).
    static func configurationPath(explicit: String?) -> (path: String, isExplicit: Bool) {
        ConfigurationFile.path(explicit: explicit)
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
        set("max-queued-messages", overrides.maxQueuedMessages.map { .int($0) })
        set("max-queued-bytes", overrides.maxQueuedBytes.map { .int($0) })
        set("max-topic-length", overrides.maxTopicLength.map { .int($0) })
        set("max-connections", overrides.maxConnections.map { .int($0) })
        set("max-connections-per-user", overrides.maxConnectionsPerUser.map { .int($0) })
        set("max-retained-bytes", overrides.maxRetainedBytes.map { .int($0) })
        set("max-retained-bytes-per-user", overrides.maxRetainedBytesPerUser.map { .int($0) })
        set("max-subscriptions-per-user", overrides.maxSubscriptionsPerUser.map { .int($0) })
        set("max-queued-bytes-per-user", overrides.maxQueuedBytesPerUser.map { .int($0) })
        set("max-queued-bytes-total", overrides.maxQueuedBytesTotal.map { .int($0) })
        set("max-retained-topics-per-user", overrides.maxRetainedTopicsPerUser.map { .int($0) })
        set("max-unread-bytes-per-user", overrides.maxUnreadBytesPerUser.map { .int($0) })
        set("max-unread-bytes-total", overrides.maxUnreadBytesTotal.map { .int($0) })
        set("history-messages", overrides.historyMessages.map { .int($0) })
        set("history-bytes", overrides.historyBytes.map { .int($0) })
        set("fleet-user", overrides.fleetUser.map { .string($0) })

        var providers: [any ConfigProvider] = [InMemoryProvider(name: "command line", values: values)]
        let file = try ConfigurationFile.read(path: path, mustExist: isExplicit)
        if let file {
            if let unknown = file.unknownKeys(DaemonSettings.keys, sections: ["rules", "history", "nats"]).first {
                let names = DaemonSettings.keys.sorted().joined(separator: ", ")
                throw ConfigurationError(
                    path: path,
                    line: unknown.line,
                    problem: "unknown setting \"\(unknown.key)\"; the settings are \(names), access rules under [rules]"
                        + ", history limits by pattern under [history] and the fleet service's under [nats] (notifyd-fleet reads them)"
                )
            }
            providers.append(file)
        }
        return try DaemonSettings(reader: ConfigReader(providers: providers), file: file, path: path)
    }

    /// The settings a configuration file may hold.
    static let keys: Set<String> = [
        "socket", "state-dir", "log-level", "sync", "max-payload", "max-topic-length", "max-subscriptions", "max-topics",
        "max-retained-bytes", "max-queued-messages", "max-queued-bytes", "max-connections", "max-connections-per-user",
        "max-retained-bytes-per-user", "max-subscriptions-per-user", "max-queued-bytes-per-user", "max-queued-bytes-total",
        "max-retained-topics-per-user", "max-unread-bytes-per-user", "max-unread-bytes-total", "history-messages",
        "history-bytes", "fleet-user",
    ]

    private init(reader: ConfigReader, file: ConfigurationFile?, path: String) throws {
        func problem(_ key: String, _ text: String) -> ConfigurationError {
            ConfigurationError(path: path, line: file?.line(of: key), problem: text)
        }
        // The reader answers nil both for a missing key and for a value of the wrong type; a value that is there
        // but unusable must be an error, not a silent default.
        func integer(_ key: String, default value: Int, minimum: Int, maximum: Int = .max) throws -> Int {
            let number: Int
            if let given = reader.int(forKey: ConfigKey(key)) {
                number = given
            } else if let text = reader.string(forKey: ConfigKey(key)) {
                throw problem(key, "\(key) must be a whole number, not \"\(text)\"")
            } else {
                number = value
            }
            guard number >= minimum else { throw problem(key, "\(key) must be at least \(minimum), not \(number)") }
            guard number <= maximum else { throw problem(key, "\(key) must be at most \(maximum), not \(number)") }
            return number
        }
        // A limit per user sits under a total: by default it is the same share of the total as the built-in defaults
        // give it (a quarter of the connections, a tenth of the topics, …), so that lowering a total alone never
        // lets one user take all of it; set above its total, it is an error.
        func perUser(_ key: String, of total: Int, named totalKey: String, builtIn: Int, builtInTotal: Int, minimum: Int) throws -> Int {
            let share = Int((Double(total) * Double(builtIn) / Double(builtInTotal)).rounded(.down))
            let number = try integer(key, default: max(minimum, min(builtIn, share)), minimum: minimum)
            guard number <= total else {
                throw problem(key, "\(key) (\(number)) is more than \(totalKey) (\(total)), the total it is a part of: lower it, or raise \(totalKey)")
            }
            return number
        }
        socketPath = SocketPath.resolve(explicit: reader.string(forKey: "socket"))
        stateDirectory = reader.string(forKey: "state-dir") ?? DaemonSettings.defaultStateDirectory()
        let levelName = reader.string(forKey: "log-level") ?? Logger.Level.info.rawValue
        guard let level = Logger.Level(rawValue: levelName) else {
            let names = Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")
            throw problem("log-level", "log-level is \"\(levelName)\"; use one of \(names)")
        }
        logLevel = level
        let syncName = reader.string(forKey: "sync") ?? StateLog.SyncPolicy.never.rawValue
        guard let policy = StateLog.SyncPolicy(rawValue: syncName) else {
            throw problem("sync", "sync is \"\(syncName)\"; use never or always")
        }
        syncPolicy = policy
        var limits = ProtocolLimits.default
        // Upper bounds keep every size the daemon computes from a setting far from overflow and from NIO's 4 GiB
        // buffers: generous for any host, refused with a sentence rather than a trap.
        let largeCount = 100_000_000
        let largeBytes = 1 << 40
        limits.maxPayload = try integer(
            "max-payload",
            default: ProtocolLimits.default.maxPayload,
            minimum: 0,
            maximum: ProtocolLimits.largestPayload
        )
        limits.maxTopic = try integer("max-topic-length", default: Topic.maxLength, minimum: 1, maximum: Topic.maxLength)
        broker = BrokerConfiguration(
            protocolLimits: limits,
            maxSubscriptionsPerConnection: try integer(
                "max-subscriptions",
                default: BrokerConfiguration.default.maxSubscriptionsPerConnection,
                minimum: 1,
                maximum: largeCount
            ),
            maxTopics: try integer("max-topics", default: BrokerConfiguration.default.maxTopics, minimum: 1, maximum: largeCount),
            maxQueuedMessages: try integer(
                "max-queued-messages",
                default: BrokerConfiguration.default.maxQueuedMessages,
                minimum: 1,
                maximum: largeCount
            ),
            maxQueuedBytes: try integer(
                "max-queued-bytes",
                default: BrokerConfiguration.default.maxQueuedBytes,
                minimum: 1,
                maximum: largeBytes
            ),
            maxConnections: try integer(
                "max-connections",
                default: BrokerConfiguration.default.maxConnections,
                minimum: 1,
                maximum: largeCount
            ),
            maxRetainedBytes: try integer(
                "max-retained-bytes",
                default: BrokerConfiguration.default.maxRetainedBytes,
                minimum: 0,
                maximum: largeBytes
            )
        )
        let builtIn = BrokerConfiguration.default
        broker.maxConnectionsPerUser = try perUser(
            "max-connections-per-user",
            of: broker.maxConnections,
            named: "max-connections",
            builtIn: builtIn.maxConnectionsPerUser,
            builtInTotal: builtIn.maxConnections,
            minimum: 1
        )
        broker.maxRetainedBytesPerUser = try perUser(
            "max-retained-bytes-per-user",
            of: broker.maxRetainedBytes,
            named: "max-retained-bytes",
            builtIn: builtIn.maxRetainedBytesPerUser,
            builtInTotal: builtIn.maxRetainedBytes,
            minimum: 0
        )
        broker.maxRetainedTopicsPerUser = try perUser(
            "max-retained-topics-per-user",
            of: broker.maxTopics,
            named: "max-topics",
            builtIn: builtIn.maxRetainedTopicsPerUser,
            builtInTotal: builtIn.maxTopics,
            minimum: 1
        )
        // One whole request must fit, or a publish of max-payload could never arrive.
        let largestRequest = limits.maxPayload + limits.maxLine + 2
        broker.maxUnreadBytesTotal = try integer(
            "max-unread-bytes-total",
            default: max(builtIn.maxUnreadBytesTotal, largestRequest),
            minimum: largestRequest,
            maximum: largeBytes
        )
        broker.maxUnreadBytesPerUser = try perUser(
            "max-unread-bytes-per-user",
            of: broker.maxUnreadBytesTotal,
            named: "max-unread-bytes-total",
            builtIn: builtIn.maxUnreadBytesPerUser,
            builtInTotal: builtIn.maxUnreadBytesTotal,
            minimum: largestRequest
        )
        broker.maxQueuedBytesTotal = try integer(
            "max-queued-bytes-total",
            default: builtIn.maxQueuedBytesTotal,
            minimum: 1,
            maximum: largeBytes
        )
        broker.maxQueuedBytesPerUser = try perUser(
            "max-queued-bytes-per-user",
            of: broker.maxQueuedBytesTotal,
            named: "max-queued-bytes-total",
            builtIn: builtIn.maxQueuedBytesPerUser,
            builtInTotal: builtIn.maxQueuedBytesTotal,
            minimum: 1
        )
        broker.maxSubscriptionsPerUser = try integer(
            "max-subscriptions-per-user",
            default: BrokerConfiguration.default.maxSubscriptionsPerUser,
            minimum: 1,
            maximum: largeCount
        )
        var rules: [AccessRule] = []
        for (name, entry) in file?.entries(in: "rules") ?? [] {
            do {
                rules.append(try AccessRule(parsing: entry.text, name: name, line: entry.line, resolver: .system))
            } catch {
                throw ConfigurationError(path: path, line: entry.line, problem: "rule \(name): \(error)")
            }
        }
        broker.accessPolicy = AccessPolicy(rules: rules)
        broker.history = HistoryLimits(
            messages: try integer("history-messages", default: BrokerConfiguration.default.history.messages, minimum: 0, maximum: largeCount),
            // 64 KiB: history-messages alone turns history on, with a sensible size.
            bytes: try integer("history-bytes", default: BrokerConfiguration.default.history.bytes, minimum: 0, maximum: largeBytes)
        )
        broker.historyRules = []
        for (pattern, entry) in file?.entries(in: "history") ?? [] {
            broker.historyRules.append(try DaemonSettings.historyRule(pattern, entry.text, path: path, line: entry.line))
        }
        broker.fleetUID = try DaemonSettings.fleetUID(
            reader.string(forKey: "fleet-user"),
            resolve: AccessRule.NameResolver.system.uid,
            resolvePackaged: { PasswordFile.uid(of: $0) }
        ) { problem("fleet-user", $0) }
    }

    /// The system user the packaged fleet service runs as: the fleet user when `fleet-user` is not set and it exists.
    static let packagedFleetUser = "notifyd-fleet"

    /// The uid that `fleet-user` names (a user name through `resolve`, or a number), or ``packagedFleetUser``'s
    /// when it is not set and `resolvePackaged` finds that user (the daemon looks in `/etc/passwd`, where the package
    /// makes it: ``PasswordFile``); nil for no fleet (`fleet-user = none`, or not set and no such user).
    static func fleetUID(
        _ text: String?,
        resolve: (String) -> UInt32?,
        resolvePackaged: (String) -> UInt32?,
        problem: (String) -> ConfigurationError
    ) throws -> UInt32? {
        guard let text else { return resolvePackaged(packagedFleetUser) }
        if text == "none" { return nil }
        if let number = UInt32(text) { return number }
        guard let uid = resolve(text) else {
            throw problem("fleet-user: no user \"\(text)\" on this system (give a user name, a uid, or none)")
        }
        return uid
    }

    /// A `[history]` line: `PATTERN = MESSAGES BYTES`, or `PATTERN = off`.
    static func historyRule(_ pattern: String, _ value: String, path: String, line: Int) throws -> HistoryRule {
        let problem = { (text: String) in ConfigurationError(path: path, line: line, problem: "history of \(pattern): \(text)") }
        guard let parsed = try? TopicPattern(pattern) else { throw problem("\"\(pattern)\" is not a topic pattern") }
        if value == "off" { return HistoryRule(parsed, .off) }
        let numbers = value.split(separator: " ", omittingEmptySubsequences: true).map { Int($0) }
        guard numbers.count == 2, let messages = numbers[0], let bytes = numbers[1], messages >= 0, bytes >= 0,
            messages <= 100_000_000, bytes <= 1 << 40
        else { throw problem("expected `MESSAGES BYTES` (two whole numbers, 0 for none) or `off`, not \"\(value)\"") }
        return HistoryRule(parsed, HistoryLimits(messages: messages, bytes: bytes))
    }

    /// `$STATE_DIRECTORY` under systemd (`StateDirectory=`), else `/var/lib/notifyd` for root and
    /// `$XDG_STATE_HOME/notifyd` (`~/.local/state/notifyd`) for other users.
    static func defaultStateDirectory() -> String {
        if let fromSystemd = POSIX.environmentValue("STATE_DIRECTORY"), !fromSystemd.isEmpty {
            // systemd may pass several, separated by colons; the first is ours.
            return String(fromSystemd.split(separator: ":").first ?? Substring(fromSystemd))
        }
        if getuid() == 0 { return "/var/lib/notifyd" }
        let home = POSIX.environmentValue("HOME") ?? "/"
        let base = POSIX.environmentValue("XDG_STATE_HOME").flatMap { $0.hasPrefix("/") ? $0 : nil } ?? home + "/.local/state"
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

extension DaemonSettings {
    /// What these settings are, one `key = value` line per setting, as `notifyd --check-config` prints them.
    var summary: String {
        let limits = broker.protocolLimits
        let lines: [(String, String)] = [
            ("socket", socketPath),
            ("state-dir", stateDirectory),
            ("log-level", logLevel.rawValue),
            ("sync", syncPolicy.rawValue),
            ("max-payload", "\(limits.maxPayload)"),
            ("max-topic-length", "\(limits.maxTopic)"),
            ("max-subscriptions", "\(broker.maxSubscriptionsPerConnection)"),
            ("max-topics", "\(broker.maxTopics)"),
            ("max-retained-bytes", "\(broker.maxRetainedBytes)"),
            ("max-retained-bytes-per-user", "\(broker.maxRetainedBytesPerUser)"),
            ("max-retained-topics-per-user", "\(broker.maxRetainedTopicsPerUser)"),
            ("max-subscriptions-per-user", "\(broker.maxSubscriptionsPerUser)"),
            ("max-queued-messages", "\(broker.maxQueuedMessages)"),
            ("max-queued-bytes", "\(broker.maxQueuedBytes)"),
            ("max-queued-bytes-per-user", "\(broker.maxQueuedBytesPerUser)"),
            ("max-queued-bytes-total", "\(broker.maxQueuedBytesTotal)"),
            ("max-unread-bytes-per-user", "\(broker.maxUnreadBytesPerUser)"),
            ("max-unread-bytes-total", "\(broker.maxUnreadBytesTotal)"),
            ("max-connections", "\(broker.maxConnections)"),
            ("max-connections-per-user", "\(broker.maxConnectionsPerUser)"),
            ("history-messages", "\(broker.history.messages)"),
            ("history-bytes", "\(broker.history.bytes)"),
            ("fleet-user", broker.fleetUID.map { "\($0)" } ?? "none"),
        ]
        var text = lines.map { "\($0.0) = \($0.1)" }.joined(separator: "\n")
        if !broker.accessPolicy.rules.isEmpty {
            text += "\n[rules]"
            for rule in broker.accessPolicy.rules { text += "\n\(rule.name) = \(rule.text)" }
        }
        if !broker.historyRules.isEmpty {
            text += "\n[history]"
            for rule in broker.historyRules {
                text += "\n\(rule.pattern) = " + (rule.limits.isOff ? "off" : "\(rule.limits.messages) \(rule.limits.bytes)")
            }
        }
        return text
    }
}
