import Logging
import Synchronization

/// The daemon's log level, shared by every logger so a configuration reload changes it everywhere at once.
final class LogLevelSetting: Sendable {
    private let level: Atomic<Int>

    init(_ level: Logger.Level) {
        self.level = Atomic(LogLevelSetting.allLevels.firstIndex(of: level)!)
    }

    var current: Logger.Level {
        get { LogLevelSetting.allLevels[level.load(ordering: .relaxed)] }
        set { level.store(LogLevelSetting.allLevels.firstIndex(of: newValue)!, ordering: .relaxed) }
    }

    private static let allLevels = Logger.Level.allCases
}

/// What notifyd's two log handlers share: the level is the one setting every logger reads (so a reload reaches all
/// of them), and metadata is kept as swift-log expects.
protocol SharedLevelLogHandler: LogHandler {
    var levelSetting: LogLevelSetting { get }
}

extension SharedLevelLogHandler {
    var logLevel: Logger.Level {
        get { levelSetting.current }
        nonmutating set { levelSetting.current = newValue }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }
}
