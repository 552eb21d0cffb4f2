import Foundation
import Logging
import NIOCore
import NotifyBus
import NotifyBroker
import ConfigurationFiles
import Testing

@testable import NotifyDaemon

@Suite("Daemon settings", .timeLimit(.minutes(3)))
struct DaemonSettingsTests {
    @Test("every max-queued-bytes the settings accept gives NIO write buffer marks it takes (it traps on a low mark under 1)")
    func writeBufferMarks() throws {
        for queued in [1, 2, 3, 7, 8, 9, 4 << 20, Int(UInt32.max)] {
            var configuration = BrokerConfiguration.default
            configuration.maxQueuedBytes = queued
            let marks = NotifyServer.writeBufferWaterMark(high: configuration.writeBufferBytes)
            #expect(marks.low >= 1 && marks.low <= marks.high, "max-queued-bytes \(queued)")
            #expect(marks.high == configuration.writeBufferBytes)
        }
    }

    final class File {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("notifyd-\(UUID().uuidString).conf").path
        init(_ text: String) { _ = FileManager.default.createFile(atPath: path, contents: Data(text.utf8)) }
        deinit { try? FileManager.default.removeItem(atPath: path) }
    }

    static let none = DaemonSettings.Overrides()

    @Test("fleet-user: a name or a uid, none, the packaged notifyd-fleet when it exists; an unknown name is an error naming the key")
    func fleetUser() async throws {
        let users = ["notifyd-fleet": UInt32(998), "fleet": 1001]
        let problem = { (text: String) in ConfigurationError(path: "f", line: 3, problem: text) }
        let nobody: (String) -> UInt32? = { _ in nil }
        #expect(try DaemonSettings.fleetUID(nil, resolve: nobody, resolvePackaged: { users[$0] }, problem: problem) == 998)
        #expect(
            try DaemonSettings.fleetUID(nil, resolve: { users[$0] }, resolvePackaged: nobody, problem: problem) == nil,
            "not set: only the packaged user's entry counts (NSS is not asked), and without it there is no fleet"
        )
        #expect(try DaemonSettings.fleetUID("fleet", resolve: { users[$0] }, resolvePackaged: nobody, problem: problem) == 1001)
        #expect(try DaemonSettings.fleetUID("notifyd-fleet", resolve: { users[$0] }, resolvePackaged: nobody, problem: problem) == 998, "named: asked of NSS")
        #expect(try DaemonSettings.fleetUID("4242", resolve: { users[$0] }, resolvePackaged: nobody, problem: problem) == 4242)
        #expect(try DaemonSettings.fleetUID("none", resolve: { users[$0] }, resolvePackaged: { users[$0] }, problem: problem) == nil)
        #expect(throws: ConfigurationError.self) {
            try DaemonSettings.fleetUID("nosuchuser", resolve: { users[$0] }, resolvePackaged: { users[$0] }, problem: problem)
        }
        let file = File("fleet-user = 4243\n")
        #expect(try await DaemonSettings.load(overrides: Self.none, configurationFile: file.path).broker.fleetUID == 4243)
        var overrides = Self.none
        overrides.fleetUser = "none"
        #expect(try await DaemonSettings.load(overrides: overrides, configurationFile: file.path).broker.fleetUID == nil, "the command line wins")
    }

    @Test("the file sets what the command line does not; the command line wins")
    func precedence() async throws {
        let file = File("log-level = debug\nmax-payload = 4096\nmax-topics = 50\nsync = always\nstate-dir = /srv/state\n")
        let fromFile = try await DaemonSettings.load(overrides: Self.none, configurationFile: file.path)
        #expect(fromFile.logLevel == .debug && fromFile.broker.protocolLimits.maxPayload == 4096)
        #expect(fromFile.broker.maxTopics == 50 && fromFile.syncPolicy == .always && fromFile.stateDirectory == "/srv/state")
        #expect(fromFile.broker.maxSubscriptionsPerConnection == BrokerConfiguration.default.maxSubscriptionsPerConnection)

        var overrides = Self.none
        overrides.logLevel = .error
        overrides.maxPayload = 10
        let both = try await DaemonSettings.load(overrides: overrides, configurationFile: file.path)
        #expect(both.logLevel == .error && both.broker.protocolLimits.maxPayload == 10 && both.broker.maxTopics == 50)
    }

    @Test("every limit can be set in the file")
    func everyLimit() async throws {
        let file = File(
            """
            max-payload = 1
            max-topic-length = 2
            max-subscriptions = 3
            max-topics = 40
            max-retained-bytes = 50
            max-queued-messages = 6
            max-queued-bytes = 7
            max-connections = 80
            max-connections-per-user = 9
            max-retained-bytes-per-user = 10
            max-subscriptions-per-user = 11
            max-queued-bytes-per-user = 12
            max-queued-bytes-total = 13
            max-retained-topics-per-user = 14
            max-unread-bytes-per-user = 1027
            max-unread-bytes-total = 1028
            history-messages = 15
            history-bytes = 16

            """
        )
        let broker = try await DaemonSettings.load(overrides: Self.none, configurationFile: file.path).broker
        let read = [
            broker.protocolLimits.maxPayload, broker.protocolLimits.maxTopic, broker.maxSubscriptionsPerConnection,
            broker.maxTopics, broker.maxRetainedBytes, broker.maxQueuedMessages, broker.maxQueuedBytes,
            broker.maxConnections, broker.maxConnectionsPerUser, broker.maxRetainedBytesPerUser, broker.maxSubscriptionsPerUser,
            broker.maxQueuedBytesPerUser, broker.maxQueuedBytesTotal, broker.maxRetainedTopicsPerUser,
        ]
        #expect(read == [1, 2, 3, 40, 50, 6, 7, 80, 9, 10, 11, 12, 13, 14])
        #expect(broker.maxUnreadBytesPerUser == 1_027 && broker.maxUnreadBytesTotal == 1_028, "a request line and the payload fit")
        #expect(broker.history == HistoryLimits(messages: 15, bytes: 16))
        #expect(DaemonSettings.keys.count == 23, "a new setting gets a line in this test (fleet-user: fleetUser())")
    }

    @Test("a limit per user left unset is the built-in defaults' share of its total: lowering a total alone never lets one user take all of it")
    func perUserDefaultsFollowTotals() async throws {
        let lowered = File("max-topics = 2000\nmax-connections = 100\nmax-retained-bytes = 1000000\nmax-queued-bytes-total = 4000000\n")
        let broker = try await DaemonSettings.load(overrides: Self.none, configurationFile: lowered.path).broker
        #expect(broker.maxRetainedTopicsPerUser == 200, "a tenth of max-topics, as 100,000 of 1,000,000")
        #expect(broker.maxConnectionsPerUser == 25 && broker.maxRetainedBytesPerUser == 250_000 && broker.maxQueuedBytesPerUser == 1_000_000)
        let tiny = File("max-topics = 2\nmax-connections = 1\n")
        let least = try await DaemonSettings.load(overrides: Self.none, configurationFile: tiny.path).broker
        #expect(least.maxRetainedTopicsPerUser == 1 && least.maxConnectionsPerUser == 1, "never below one")
        let empty = File("")
        let defaults = try await DaemonSettings.load(overrides: Self.none, configurationFile: empty.path).broker
        #expect(defaults.maxRetainedTopicsPerUser == 100_000 && defaults.maxConnectionsPerUser == 4_096, "the built-in defaults stand")
        let raised = File("max-topics = 50000000\n")
        #expect(try await DaemonSettings.load(overrides: Self.none, configurationFile: raised.path).broker.maxRetainedTopicsPerUser == 100_000,
                "a raised total keeps the built-in per-user default")
    }

    @Test("a file of comments only is an empty configuration")
    func commentsOnly() async throws {
        let file = File("# nothing set yet\n\n   # indented comment\n; and another\n")
        let settings = try await DaemonSettings.load(overrides: Self.none, configurationFile: file.path)
        #expect(settings.logLevel == .info && settings.broker == .default)
    }

    @Test("an unusable file is an error that names the file, the line and the problem", arguments: [
        ("# limits\nmax-payload = lots\n", "line 2: max-payload must be a whole number, not \"lots\""),
        ("max-topics = 0\n", "line 1: max-topics must be at least 1"),
        ("\n\nlog-level = loud\n", "line 3: log-level is \"loud\""),
        ("sync = sometimes\n", "line 1: sync is \"sometimes\"; use never or always"),
        ("log-level debug\n", "line 1: expected `key = value`, found \"log-level debug\""),
        ("max-topic-length = 300\n", "line 1: max-topic-length must be at most 255, not 300"),
        // Issue 14: every size has an upper bound, well before arithmetic or NIO's 4 GiB buffers would trap.
        ("max-payload = 4294967296\n", "line 1: max-payload must be at most 268435456, not 4294967296"),
        ("max-queued-bytes = 9223372036854775807\n", "line 1: max-queued-bytes must be at most 1099511627776"),
        ("max-retained-bytes-per-user = 2199023255552\n", "line 1: max-retained-bytes-per-user (2199023255552) is more than max-retained-bytes (268435456)"),
        // Issue 34: a limit per user above the total it sits under is a mistake, said at start.
        ("max-topics = 2000\nmax-retained-topics-per-user = 5000\n", "line 2: max-retained-topics-per-user (5000) is more than max-topics (2000), the total it is a part of"),
        ("max-connections-per-user = 20000\n", "line 1: max-connections-per-user (20000) is more than max-connections (16384)"),
        ("max-connections = 1000000000\n", "line 1: max-connections must be at most 100000000"),
        ("max-unread-bytes-per-user = 1000\n", "line 1: max-unread-bytes-per-user must be at least 1049602"),
        ("max-paylod = 10\n", "line 1: unknown setting \"max-paylod\"; the settings are fleet-user, history-bytes, history-messages, log-level, max-connections,"),
        ("sync = never\nsync = always\n", "line 2: sync is set twice (also on line 1)"),
        ("[limits\n", "line 1: a section header is [name]"),
        ("[history]\nbackup.> = lots\n", "line 2: history of backup.>: expected `MESSAGES BYTES`"),
        ("[history]\nbackup.>> = 1 2\n", "line 2: history of backup.>>: \"backup.>>\" is not a topic pattern"),
    ])
    func invalid(_ text: String, _ expected: String) async throws {
        let file = File(text)
        let error = await #expect(throws: ConfigurationError.self) {
            try await DaemonSettings.load(overrides: Self.none, configurationFile: file.path)
        }
        #expect(error?.description.contains(file.path) == true)
        #expect(error?.description.contains(expected) == true, "\(String(describing: error))")
    }

    @Test("history: a default for every topic, and limits by pattern under [history], the first that matches deciding")
    func history() async throws {
        let file = File("history-messages = 10\n[history]\nbackup.> = 1000 1048576\nmetrics.> = off\n> = 5 4096\n")
        let settings = try await DaemonSettings.load(overrides: Self.none, configurationFile: file.path)
        let broker = settings.broker
        #expect(broker.history == HistoryLimits(messages: 10, bytes: 65_536), "history-bytes has a default; history-messages is 0 by default")
        #expect(broker.historyRules.map(\.pattern.text) == ["backup.>", "metrics.>", ">"])
        #expect(broker.historyLimits(of: try Topic("backup.nightly")) == HistoryLimits(messages: 1_000, bytes: 1 << 20))
        #expect(broker.historyLimits(of: try Topic("metrics.cpu")).isOff)
        #expect(broker.historyLimits(of: try Topic("other")) == HistoryLimits(messages: 5, bytes: 4_096))
        #expect(settings.summary.hasSuffix("[history]\nbackup.> = 1000 1048576\nmetrics.> = off\n> = 5 4096"))
    }

    @Test("an explicit file must exist")
    func explicitMissing() async {
        await #expect(throws: ConfigurationError.self) {
            try await DaemonSettings.load(overrides: Self.none, configurationFile: "/nonexistent/notifyd.conf")
        }
    }

    @Test("a reload changes the log level and limits, and names what takes a restart")
    func reloadable() async throws {
        var overrides = Self.none
        overrides.socket = "/tmp/a.sock"
        let empty = File("")
        let running = try await DaemonSettings.load(overrides: overrides, configurationFile: empty.path)
        let file = File("log-level = debug\nmax-payload = 99\nstate-dir = /elsewhere\n")
        overrides.socket = "/tmp/b.sock"
        let newer = try await DaemonSettings.load(overrides: overrides, configurationFile: file.path)
        let (applied, ignored) = running.reloadable(from: newer)
        #expect(applied.logLevel == .debug && applied.broker.protocolLimits.maxPayload == 99)
        #expect(applied.socketPath == "/tmp/a.sock" && applied.stateDirectory == running.stateDirectory)
        #expect(ignored == ["socket", "state-dir"])
    }
}
