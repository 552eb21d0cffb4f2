import NotifyProtocol
import Logging
import NotifySystem

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Writes log records to the systemd journal natively (``JournalSocket``, as `sd_journal_sendv` does), with the
/// metadata as fields of their own: `journalctl -u notifyd TOPIC=backup.status` finds the records about that topic,
/// `PEER_UID=1000` those about that user's connections, and `MESSAGE_ID=` those of one kind of event (see
/// ``DaemonEvent``).
struct JournalLogHandler: SharedLevelLogHandler {
    let identifier: String
    let levelSetting: LogLevelSetting
    var metadata: Logger.Metadata = [:]

    func log(event: Logging.LogEvent) {
        let merged = metadata.merging(event.metadata ?? [:]) { $1 }
        let message = event.message.description
        let fields = JournalLogHandler.fields(
            identifier: identifier,
            level: event.level,
            message: message,
            metadata: merged,
            file: event.file,
            function: event.function,
            line: event.line
        )
        guard !JournalSocket.shared.send(fields) else { return }
        // The journal did not take it (journald restarting, its queue full): a line on standard error, which
        // systemd connects to the journal too, rather than a record lost.
        let line = StandardErrorLogHandler.line(
            time: PublishTime.now(), identifier: identifier, level: event.level, message: message, metadata: merged)
        _ = line.utf8CString.withUnsafeBufferPointer { write(2, $0.baseAddress, $0.count - 1) }
    }

    /// The journal fields of one record. Metadata keys become field names (``JournalSocket/fieldName(_:)``).
    static func fields(
        identifier: String,
        level: Logger.Level,
        message: String,
        metadata: Logger.Metadata,
        file: String,
        function: String,
        line: UInt
    ) -> [(name: String, value: String)] {
        var fields = [
            ("MESSAGE", message),
            ("PRIORITY", "\(priority(of: level))"),
            ("SYSLOG_IDENTIFIER", identifier),
            ("CODE_FILE", file),
            ("CODE_LINE", "\(line)"),
            ("CODE_FUNC", function),
        ]
        for (key, value) in metadata.sorted(by: { $0.key < $1.key }) {
            fields.append((JournalSocket.fieldName(key), "\(value)"))
        }
        return fields
    }

    /// The syslog priority of a level, as journald and `journalctl -p` use it.
    static func priority(of level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: return 7
        case .info: return 6
        case .notice: return 5
        case .warning: return 4
        case .error: return 3
        case .critical: return 2
        }
    }
}
