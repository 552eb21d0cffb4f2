import NIOCore
import NotifyProtocol

/// Where this host stands in the fleet's log, as the daemon confirmed it, and what of that is in the state file
/// (`<state-dir>/positions-<prefix>`): what the bridge hands the daemon is kept as a position only once the daemon
/// confirms it (a sync), and the file is written only when that changed, at most once per ``writeInterval``, so a
/// restart reads the log from where the daemon really stood without a write per message.
///
/// The origins' live positions are the ``OriginSequencer``'s; this keeps the confirmed copy, the file, and where a
/// catch-up starts when no origin is known. A value the bridge owns on its event loop; the bridge schedules.
struct PositionKeeper {
    /// How often at most the daemon is asked to confirm what it was handed, and the file written.
    static let syncInterval = TimeAmount.milliseconds(50)
    static let writeInterval = TimeAmount.seconds(1)

    private let stateDirectory: String?
    /// The state file of the prefix loaded last; nil without a state directory (positions are then kept in memory
    /// only, and a restart starts from the log's end).
    private(set) var path: String?
    /// Where a catch-up starts when no origin is known: where the last one ended.
    var start: UInt64?
    /// Where this host stands as the daemon last confirmed, and as last written to ``path``.
    private(set) var confirmed = PositionFile()
    private var written: PositionFile?
    /// Whether this host has never stood anywhere in this log (no state file): it starts at every origin's head.
    private(set) var isFirstJoin = true
    /// A sync, or a write, waits to run: none more is scheduled meanwhile.
    var syncIsScheduled = false
    var writeIsScheduled = false

    init(stateDirectory: String?) {
        self.stateDirectory = stateDirectory
    }

    /// Reads where this host stood in the log of `prefix`. Throws when the file does not read: this host then
    /// starts afresh, and the next write replaces the file.
    mutating func load(prefix: String) throws {
        path = stateDirectory.map { "\($0)/positions-\(prefix)" }
        confirmed = PositionFile()
        written = nil
        start = nil
        isFirstJoin = true
        guard let path, let file = try PositionFile.read(path) else { return }
        confirmed = file
        written = file
        start = file.start
        isFirstJoin = false
    }

    /// Where this host stands now, with the sequencer's `origins`: what a sync asks the daemon to confirm.
    func snapshot(of origins: [String: OriginPosition]) -> PositionFile {
        PositionFile(origins: origins, start: start ?? 0)
    }

    /// The daemon confirmed all it was handed when `snapshot` was taken.
    mutating func confirm(_ snapshot: PositionFile) {
        confirmed = snapshot
    }

    /// Whether a write is worth scheduling: there is a file, and no write waits already.
    var mayScheduleWrite: Bool { path != nil && !writeIsScheduled }

    /// Writes the confirmed positions to the file, unless it holds them already; returns whether it wrote.
    @discardableResult
    mutating func write() throws -> Bool {
        guard let path, confirmed != written else { return false }
        try confirmed.write(to: path)
        written = confirmed
        return true
    }

    /// Where this host starts in an origin it meets at `head`: on its first join, at the head (what came before
    /// is not this host's to take in); later, at the origin's first message (an origin that started while this
    /// host was away: the log brings what it still holds, and the rest is announced as missed).
    func firstPosition(at head: ExportStamp) -> OriginPosition {
        OriginPosition(epoch: head.epoch, taken: isFirstJoin ? head.number : 0, logSequence: start ?? 0)
    }

    /// The heads this host found on its first join were taken as its start: from now on it stands in the log.
    mutating func joined() {
        isFirstJoin = false
    }

    /// The daemon's link was lost: what it was handed and did not confirm may be lost with it. Returns the
    /// origins' positions to go back to; the catch-up start goes back with them.
    mutating func fallBack() -> [String: OriginPosition] {
        start = confirmed.start
        return confirmed.origins
    }
}
