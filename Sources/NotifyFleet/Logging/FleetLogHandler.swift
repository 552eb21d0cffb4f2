package import Logging
import NIOConcurrencyHelpers
import NotifyProtocol

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The fleet service's log: records with their fields (`MESSAGE_ID` among them) sent to the journal's own socket
/// when standard error is the journal, as systemd's native protocol writes them (no libsystemd: only the daemon links
/// it); readable lines on standard error otherwise (`2026-12-06T09:30:00Z notifyd-fleet notice: …`).
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
        if let journal, journal.send(message: message, level: event.level, metadata: merged) { return }
        var details = merged.filter { $0.key != FleetEvent.metadataKey }.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
            .joined(separator: " ")
        if !details.isEmpty { details = " (\(details))" }
        let line = "\(String(PublishTime.now().rfc3339.prefix(19)))Z notifyd-fleet \(event.level): \(message)\(details)\n"
        _ = line.utf8CString.withUnsafeBufferPointer { write(2, $0.baseAddress, $0.count - 1) }
    }

    /// Whether standard error is the journal's stream (`JOURNAL_STREAM` names its device and inode).
    package static func standardErrorIsJournal() -> Bool {
        guard let value = getenv("JOURNAL_STREAM").map({ String(cString: $0) }) else { return false }
        let parts = value.split(separator: ":")
        var status = stat()
        guard parts.count == 2, fstat(2, &status) == 0 else { return false }
        return parts[0] == "\(status.st_dev)" && parts[1] == "\(status.st_ino)"
    }
}

/// A datagram socket to `/run/systemd/journal/socket`, shared by every handler.
private final class JournalSocket: Sendable {
    static let shared = JournalSocket()
    private let descriptor: Int32

    private init() {
        descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    }

    /// Sends one record; false if the journal did not take it (then the caller writes to standard error).
    func send(message: String, level: Logger.Level, metadata: Logger.Metadata) -> Bool {
        guard descriptor >= 0 else { return false }
        var record: [UInt8] = []
        func field(_ name: String, _ value: String) {
            let bytes = Array(value.utf8)
            record += Array(name.utf8)
            if bytes.contains(UInt8(ascii: "\n")) {
                // A value with a line break: its name, a line break, its length in 64-bit little-endian, the bytes.
                record.append(UInt8(ascii: "\n"))
                withUnsafeBytes(of: UInt64(bytes.count).littleEndian) { record += $0 }
                record += bytes
            } else {
                record.append(UInt8(ascii: "="))
                record += bytes
            }
            record.append(UInt8(ascii: "\n"))
        }
        field("MESSAGE", message)
        field("PRIORITY", "\(Self.priority(level))")
        field("SYSLOG_IDENTIFIER", "notifyd-fleet")
        for (key, value) in metadata {
            let name = key == FleetEvent.metadataKey ? "MESSAGE_ID" : key.uppercased().filter { $0.isLetter || $0.isNumber || $0 == "_" }
            guard !name.isEmpty, !name.hasPrefix("_"), name.first?.isNumber == false else { continue }
            field(name, "\(value)")
        }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let path = "/run/systemd/journal/socket"
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.enumerated() { raw[index] = byte }
        }
        let sent = record.withUnsafeBytes { bytes in
            withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(descriptor, bytes.baseAddress, bytes.count, 0, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
        }
        return sent == record.count
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
