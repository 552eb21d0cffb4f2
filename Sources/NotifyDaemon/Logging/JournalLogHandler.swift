import CSystemd
import NotifyProtocol
import Logging
import NotifySystem

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Writes log records to the systemd journal natively (`sd_journal_sendv`), with the metadata as fields of their
/// own: `journalctl -u notifyd TOPIC=backup.status` finds the records about that topic, `PEER_UID=1000` those
/// about that user's connections, and `MESSAGE_ID=` those of one kind of event (see ``DaemonEvent``).
struct JournalLogHandler: SharedLevelLogHandler {
    let identifier: String
    let levelSetting: LogLevelSetting
    var metadata: Logger.Metadata = [:]

    func log(event: Logging.LogEvent) {
        let fields = JournalLogHandler.fields(
            identifier: identifier,
            level: event.level,
            message: event.message.description,
            metadata: metadata.merging(event.metadata ?? [:]) { $1 },
            file: event.file,
            function: event.function,
            line: event.line
        )
        JournalLogHandler.send(fields)
    }

    /// The journal fields of one record, each `NAME=value`. Metadata keys become field names: upper case, with
    /// anything but letters, digits and `_` turned into `_`, never starting with `_` (reserved for fields the
    /// journal sets itself) or a digit.
    static func fields(
        identifier: String,
        level: Logger.Level,
        message: String,
        metadata: Logger.Metadata,
        file: String,
        function: String,
        line: UInt
    ) -> [String] {
        var fields = [
            "MESSAGE=\(message)",
            "PRIORITY=\(priority(of: level))",
            "SYSLOG_IDENTIFIER=\(identifier)",
            "CODE_FILE=\(file)",
            "CODE_LINE=\(line)",
            "CODE_FUNC=\(function)",
        ]
        for (key, value) in metadata.sorted(by: { $0.key < $1.key }) {
            fields.append("\(fieldName(key))=\(value)")
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

    static func fieldName(_ key: String) -> String {
        var name = String(key.uppercased().unicodeScalars.map { scalar -> Character in
            let isAllowed = ("A"..."Z").contains(scalar) || ("0"..."9").contains(scalar) || scalar == "_"
            return isAllowed ? Character(scalar) : "_"
        })
        while name.hasPrefix("_") { name.removeFirst() }
        if name.first.map({ $0.isNumber }) ?? true { name = "F" + name }
        return name
    }

    private static func send(_ fields: [String]) {
        var storage = fields.map { Array($0.utf8) }
        var vectors: [iovec] = []
        vectors.reserveCapacity(storage.count)
        for index in storage.indices {
            storage[index].withUnsafeMutableBytes { bytes in
                vectors.append(iovec(iov_base: bytes.baseAddress, iov_len: bytes.count))
            }
        }
        // The pointers stay valid: `storage` is not mutated again before this call returns.
        _ = withExtendedLifetime(storage) { sd_journal_sendv(vectors, CInt(vectors.count)) }
    }

    /// Whether standard error is connected to the journal, as systemd says through `$JOURNAL_STREAM`
    /// (`<device>:<inode>` of the stream it set up); a terminal or a redirect to a file is not.
    static func standardErrorIsJournal() -> Bool {
        guard let stream = POSIX.environmentValue("JOURNAL_STREAM") else { return false }
        let parts = stream.split(separator: ":")
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return false }
        var info = stat()
        guard fstat(2, &info) == 0 else { return false }
        return UInt64(info.st_dev) == device && UInt64(info.st_ino) == inode
    }
}
