package import Logging
import NIOConcurrencyHelpers
import NotifyProtocol
import NotifySystem

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The fleet service's log: records with their fields (`MESSAGE_ID` among them) sent to the journal's own socket
/// when standard error is the journal (``JournalSocket``); readable lines on standard error otherwise
/// (`2026-12-06T09:30:00Z notifyd-fleet notice: …`).
package struct FleetLogHandler: LogHandler {
    package var logLevel: Logger.Level
    package var metadata: Logger.Metadata = [:]
    private let journal: JournalSocket?

    /// A handler at `level`; to the journal when `toJournal`.
    package init(level: Logger.Level, toJournal: Bool) {
        logLevel = level
        journal = toJournal ? JournalSocket.shared : nil
    }

    package subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    package func log(event: LogEvent) {
        let merged = metadata.merging(event.metadata ?? [:]) { $1 }
        let message = event.message.description
        if let journal, journal.send(FleetLogHandler.fields(message: message, level: event.level, metadata: merged)) { return }
        var details = merged.filter { $0.key != FleetEvent.metadataKey }.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
            .joined(separator: " ")
        if !details.isEmpty { details = " (\(details))" }
        let line = "\(String(PublishTime.now().rfc3339.prefix(19)))Z notifyd-fleet \(event.level): \(message)\(details)\n"
        _ = line.utf8CString.withUnsafeBufferPointer { write(2, $0.baseAddress, $0.count - 1) }
    }

    /// The journal fields of one record: the message, its priority, the identifier and one field per metadata key
    /// (the fleet's event as `MESSAGE_ID`).
    static func fields(message: String, level: Logger.Level, metadata: Logger.Metadata) -> [(name: String, value: String)] {
        var fields = [("MESSAGE", message), ("PRIORITY", "\(priority(level))"), ("SYSLOG_IDENTIFIER", "notifyd-fleet")]
        for (key, value) in metadata.sorted(by: { $0.key < $1.key }) {
            fields.append((key == FleetEvent.metadataKey ? "MESSAGE_ID" : JournalSocket.fieldName(key), "\(value)"))
        }
        return fields
    }

    private static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }

}
