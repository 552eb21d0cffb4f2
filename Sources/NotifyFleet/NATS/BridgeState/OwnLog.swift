import NIOCore
import NotifyProtocol

/// This host's own part of the fleet's log: where its records go (`<prefix>_log.<host>`) and where their
/// acknowledgements come back (an inbox of this process's, `<inbox>.<record number>`), where its head goes
/// (`<prefix>_head.<host>`) and what it last said, and how long the log has kept this host waiting for an
/// acknowledgement. Other hosts read a record to repair a gap, and a head to learn how far this host's log goes:
/// a record the log did not store must go again, and a head must say only what the log acknowledged.
///
/// It also keeps what the journal was told once or now and then about the log: live messages of other hosts' that
/// their log never confirmed, and the stream an earlier version wrote. A value the bridge owns on its event loop;
/// the bridge writes, schedules and logs, this only decides.
struct OwnLog {
    /// Records not acknowledged for this long are sent again on the same connection: a stream whose leader died
    /// answers nothing for them, and other hosts wait for them to fill their gaps.
    static let acknowledgementDeadline = TimeAmount.seconds(2)
    /// How often at most the head is written: one stored message per interval, however many records.
    static let headInterval = TimeAmount.milliseconds(200)

    /// Where this host's records go.
    private(set) var recordSubject: String
    /// Where this host's head goes.
    private(set) var headSubject: String
    /// The export number the head last said on this log; 0 before it said any.
    private(set) var headWritten: UInt64 = 0
    /// A write of the head waits to run: none more is scheduled meanwhile.
    private(set) var headIsScheduled = false
    /// Where the acknowledgements of this process's records come, `<inbox>.<record number>`: its own, so that no
    /// other process's reach it.
    let inbox: String
    /// When a record was last acknowledged, or the wait for one started.
    private(set) var lastAcknowledgement: NIODeadline
    /// Batches of live messages their log never confirmed, since the start: the journal hears of some only.
    private var unconfirmedNoted: UInt64 = 0
    private var earlierStreamNoted = false

    init(settings: BridgeSettings, inbox: String = "_INBOX.\(UInt64.random(in: 1...UInt64.max)).log", now: NIODeadline = .now()) {
        let log = JetStreamLog(settings: settings)
        recordSubject = log.subject(of: settings.hostName)
        headSubject = log.headSubject(of: settings.hostName)
        self.inbox = inbox
        lastAcknowledgement = now
    }

    /// Settings with another prefix or host name: another log, or another origin in it, whose head has said
    /// nothing yet. The inbox, and what the journal was told, stay.
    mutating func moved(to settings: BridgeSettings) {
        let log = JetStreamLog(settings: settings)
        recordSubject = log.subject(of: settings.hostName)
        headSubject = log.headSubject(of: settings.hostName)
        headWritten = 0
    }

    // MARK: Records

    /// What the connection subscribes to for the acknowledgements of every record.
    var acknowledgements: String { inbox + ".*" }

    /// The `PUB` line of record `number`, `size` bytes: to ``recordSubject``, its acknowledgement asked for at
    /// `<inbox>.<number>`. The record's bytes and a CRLF follow it.
    func recordLine(number: UInt64, size: Int) -> ByteBuffer {
        var line = ByteBuffer()
        line.writeStaticString("PUB ")
        line.writeString(recordSubject)
        line.writeStaticString(" ")
        line.writeString(inbox)
        line.writeStaticString(".")
        line.writeDecimal(number)
        line.writeStaticString(" ")
        line.writeDecimal(UInt64(size))
        line.writeStaticString("\r\n")
        return line
    }

    /// The record an acknowledgement's subject names (what follows its last dot); nil when that is no number.
    static func recordNumber(acknowledgedAt subject: String) -> UInt64? {
        guard let dot = subject.utf8.lastIndex(of: UInt8(ascii: ".")) else { return nil }
        return UInt64(Substring(subject.utf8[subject.utf8.index(after: dot)...]))
    }

    // MARK: Waiting for acknowledgements

    /// A record was acknowledged at `now`, or, with none outstanding, the first is sent: the wait starts again.
    mutating func acknowledgementWaitStarts(at now: NIODeadline = .now()) {
        lastAcknowledgement = now
    }

    /// Whether the log has kept this host waiting longer than `span` at `now` (for records outstanding: the caller
    /// knows whether any are).
    func hasWaited(longerThan span: TimeAmount, at now: NIODeadline = .now()) -> Bool {
        now - lastAcknowledgement > span
    }

    /// Whether the records outstanding are due to go again at `now`, past ``acknowledgementDeadline``; if so, the
    /// wait starts again from now, so that they go once per deadline, not at every look.
    mutating func resendIsDue(at now: NIODeadline = .now()) -> Bool {
        guard hasWaited(longerThan: Self.acknowledgementDeadline, at: now) else { return false }
        lastAcknowledgement = now
        return true
    }

    // MARK: The head

    /// Whether a write of the head is to be scheduled now that the log acknowledged export number `acknowledged`:
    /// the head says less, and no write waits. True once per wait; the bridge calls ``scheduledHeadWriteRuns()`` when it runs.
    mutating func headWriteIsDue(acknowledged: UInt64) -> Bool {
        guard acknowledged > headWritten, !headIsScheduled else { return false }
        headIsScheduled = true
        return true
    }

    /// The write scheduled runs: the next acknowledgement may schedule another.
    mutating func scheduledHeadWriteRuns() {
        headIsScheduled = false
    }

    /// The head to write now, of epoch `epoch` through export number `acknowledged`, taken as written; nil when the
    /// head says that much already.
    mutating func head(epoch: UInt64, acknowledged: UInt64) -> ExportStamp? {
        guard acknowledged > headWritten else { return nil }
        headWritten = acknowledged
        return ExportStamp(epoch: epoch, number: acknowledged)
    }

    // MARK: What the journal was told

    /// Notes `count` live messages of another host's that its log never confirmed; returns whether the journal hears
    /// of them: the first batch and every hundredth, since a forger, or a host whose log cannot be written, sends
    /// such messages for as long as it runs.
    mutating func unconfirmedAreWorthLogging(_ count: Int) -> Bool {
        guard count > 0 else { return false }
        unconfirmedNoted += 1
        return unconfirmedNoted == 1 || unconfirmedNoted % 100 == 0
    }

    /// Whether the journal hears that the stream of an earlier version is still there: once per start.
    mutating func earlierStreamIsWorthLogging() -> Bool {
        guard !earlierStreamNoted else { return false }
        earlierStreamNoted = true
        return true
    }
}
