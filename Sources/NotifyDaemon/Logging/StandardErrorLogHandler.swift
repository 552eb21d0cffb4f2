import Logging
import NotifyProtocol

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Readable log lines on standard error, for a daemon run from a terminal or under a supervisor other than
/// systemd: `2026-11-22T09:30:00Z notifyd info: listening (socket=/run/user/1000/notifyd/notifyd.sock)`.
struct StandardErrorLogHandler: SharedLevelLogHandler {
    let identifier: String
    let levelSetting: LogLevelSetting
    var metadata: Logger.Metadata = [:]

    func log(event: Logging.LogEvent) {
        let merged = metadata.merging(event.metadata ?? [:]) { $1 }
        let line = StandardErrorLogHandler.line(
            time: PublishTime.now(),
            identifier: identifier,
            level: event.level,
            message: event.message.description,
            metadata: merged
        )
        _ = line.utf8CString.withUnsafeBufferPointer { write(2, $0.baseAddress, $0.count - 1) }
    }

    /// One record as a line; the message id is left out, as it is for machines.
    static func line(time: PublishTime, identifier: String, level: Logger.Level, message: String, metadata: Logger.Metadata) -> String {
        var details = metadata.filter { $0.key != DaemonEvent.metadataKey }.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
            .joined(separator: " ")
        if !details.isEmpty { details = " (\(details))" }
        let seconds = String(time.rfc3339.prefix(19)) + "Z"
        return "\(seconds) \(identifier) \(level): \(message)\(details)\n"
    }
}
