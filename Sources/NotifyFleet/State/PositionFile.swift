import NotifyProtocol

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Where this host stands in the fleet's log, kept in its own state directory (`positions`, one per subject prefix),
/// so that the NATS server keeps no state per host: for each origin, its run, the last export number the daemon
/// confirmed taking in, and the log sequence to read after; and where a catch-up with no origin known starts.
///
/// Written whole to a new file and renamed over the old, so a crash leaves one or the other. Read as a trust boundary
/// (anyone who could write the directory could write it): bounded in size and origins, every number checked digits,
/// every host name checked; a file that does not read is set aside with a sentence, and the host starts afresh.
package struct PositionFile: Equatable, Sendable {
    package var origins: [String: OriginPosition] = [:]
    /// With no origin known: the log sequence a catch-up reads after.
    package var start: UInt64 = 0

    package init(origins: [String: OriginPosition] = [:], start: UInt64 = 0) {
        self.origins = origins
        self.start = start
    }

    static let header = "notifyd-fleet positions 1"
    /// The most origins the file holds, as ``OriginSequencer/originLimit``; and its most bytes.
    static let originLimit = 4_096
    static let largest = 1 << 20

    /// The file's text.
    package var text: String {
        var text = Self.header + "\nstart \(start)\n"
        for host in origins.keys.sorted() {
            let position = origins[host]!
            text += "\(host) \(position.epoch) \(position.taken) \(position.logSequence)\n"
        }
        return text
    }

    /// Reads `text`; throws a sentence saying what is wrong with it.
    package init(parsing text: String) throws(PositionFileError) {
        var lines = text.split(separator: "\n", omittingEmptySubsequences: true)
        guard lines.first == Substring(Self.header) else { throw PositionFileError("it does not start with \"\(Self.header)\"") }
        lines.removeFirst()
        for (index, line) in lines.enumerated() {
            let fields = line.split(separator: " ")
            if fields.count == 2, fields[0] == "start", let start = UInt64(fields[1]) {
                self.start = start
                continue
            }
            guard fields.count == 4, let epoch = UInt64(fields[1]), let taken = UInt64(fields[2]), let log = UInt64(fields[3]),
                FleetImport.isValidHostName(String(fields[0]))
            else { throw PositionFileError("line \(index + 2) is not \"<host> <epoch> <number> <log sequence>\"") }
            guard origins.count < Self.originLimit else { throw PositionFileError("it holds more than \(Self.originLimit) origins") }
            origins[String(fields[0])] = .init(epoch: epoch, taken: taken, logSequence: log)
        }
    }

    /// The file at `path`; nil when there is none.
    package static func read(_ path: String) throws(PositionFileError) -> PositionFile? {
        let bytes: [UInt8]
        do {
            guard access(path, F_OK) == 0 else { return nil }
            bytes = try SecretFile.contents(of: path, holding: "positions", atMost: largest)
        } catch {
            throw PositionFileError("\(error)")
        }
        return try PositionFile(parsing: String(decoding: bytes, as: UTF8.self))
    }

    /// Writes the file at `path`: to `path.new`, synced, then renamed over it.
    package func write(to path: String) throws(PositionFileError) {
        let temporary = path + ".new"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw PositionFileError("\(temporary) cannot be written: \(String(cString: strerror(errno)))") }
        var bytes = Array(text.utf8)
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeMutableBytes { Glibc.write(descriptor, $0.baseAddress! + written, $0.count - written) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else {
                let reason = String(cString: strerror(errno))
                close(descriptor)
                throw PositionFileError("\(temporary) cannot be written: \(reason)")
            }
            written += count
        }
        fsync(descriptor)
        close(descriptor)
        guard rename(temporary, path) == 0 else { throw PositionFileError("\(path) cannot be replaced: \(String(cString: strerror(errno)))") }
    }
}

/// Why the positions file cannot be used.
package struct PositionFileError: Error, CustomStringConvertible {
    package let description: String
    init(_ description: String) { self.description = description }
}
