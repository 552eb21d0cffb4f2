package import NIOCore
package import NotifyProtocol

/// Writes a local publish (an `EXP` frame from the daemon) as the NATS operations that export it:
/// `HPUB <prefix>.<topic>` with its provenance in one header (``Provenance``,
/// `Notifyd: 1 <host> <uid> <pid> <seq> <time> <kind> <export> <log> <unit>`), and for a retained one the same to
/// `<prefix>-latest.<topic>` (the stream of latest messages; the bridge writes that one once per topic per flush
/// window, ``LatestCoalescer``). A `CLEAR` goes both ways too, of kind `c` and with no payload: in the stream it takes
/// the cleared message's place. Straight into the outbox's buffer: no `String`, no headers value, no buffer of its
/// own per message.
///
/// With a log (catch-up on), a live message also carries its export number and the log's last acknowledged record
/// (``ExportStamp``, and the `<log>` field): a receiver tells a gap from them and knows where in the log to look.
/// One header of about 80 bytes instead of one per field (about 210): every byte of it is carried by the server to
/// every host and stored in the log, and the server's CPU per message grows with its size.
package struct ExportEncoder {
    private let livePrefix: [UInt8]
    private let latestPrefix: [UInt8]
    /// `NATS/1.0` and the header's start up to the host, the same for every message.
    private let headerStart: [UInt8]
    /// The header block of the message being written, reused.
    private var headers = ByteBuffer()
    /// This run's epoch: its exports are numbered from 1 under it.
    package let epoch: UInt64
    /// The number the next export gets, once ``numberUsed()`` says the last one went into the outbox.
    package private(set) var nextNumber: UInt64 = 1
    /// The stream sequence of the last record of the log the server acknowledged.
    package var logSequence: UInt64 = 0
    /// Whether exports are numbered: only with a log to repair gaps from.
    package var numbers: Bool
    /// The last unit checked, and whether it is a unit name: a run of one publisher's messages is checked once.
    private var checkedUnit: (unit: String, isName: Bool)?

    package init(prefix: String, hostName: String, epoch: UInt64 = ExportEncoder.newEpoch(), numbers: Bool = false) {
        self.epoch = epoch
        self.numbers = numbers
        livePrefix = Array("HPUB \(prefix).".utf8)
        latestPrefix = Array("HPUB \(prefix)-latest.".utf8)
        headerStart = Array("NATS/1.0\r\nNotifyd: 1 \(hostName) ".utf8)
    }

    /// Writes `message`'s operations: ``prepare(_:)`` then ``writePrepared(_:into:)``.
    package mutating func write(_ message: FleetExport, into buffer: inout ByteBuffer) {
        _ = prepare(message)
        writePrepared(message, into: &buffer)
    }

    /// An epoch for a run that starts now: the time in microseconds, so a later run's is larger.
    package static func newEpoch() -> UInt64 { max(1, PublishTime.now().microsecondsSinceEpoch) }

    /// The message last prepared with a number went into the outbox: the next gets the next number.
    package mutating func numberUsed() { nextNumber += 1 }

    /// Builds `message`'s headers and returns the size NATS counts against its `max_payload`: headers and payload.
    /// `numbered`: with its export number (a live message; not its copy for the stream of latest messages).
    package mutating func prepare(_ export: FleetExport, numbered: Bool = true) -> Int {
        let message = export.delivery
        headers.clear()
        headers.writeBytes(headerStart)
        headers.writeDecimal(UInt64(message.publisher.uid))
        headers.writeStaticString(" ")
        headers.writeDecimal(Int64(message.publisher.pid))
        headers.writeStaticString(" ")
        headers.writeDecimal(message.sequence)
        headers.writeStaticString(" ")
        headers.writeDecimal(message.time.microsecondsSinceEpoch)
        switch export.kind {
        case .notRetained: headers.writeStaticString(" m ")
        case .retained: headers.writeStaticString(" r ")
        case .clear: headers.writeStaticString(" c ")
        }
        if numbers, numbered {
            headers.writeDecimal(epoch)
            headers.writeStaticString("-")
            headers.writeDecimal(nextNumber)
            headers.writeStaticString(" ")
            headers.writeDecimal(logSequence)
        } else {
            headers.writeStaticString("- -")
        }
        headers.writeStaticString(" ")
        if let unit = message.publisher.unit, isUnitName(unit) {
            headers.writeString(unit)
        } else {
            headers.writeStaticString("-")
        }
        headers.writeStaticString("\r\n\r\n")
        return headers.readableBytes + message.payload.readableBytes
    }

    /// Whether `unit` may go in the header: a unit name has no space to split the fields at (the daemon gives one
    /// always; this keeps a bad one from reading as other fields).
    private mutating func isUnitName(_ unit: String) -> Bool {
        if let checkedUnit, checkedUnit.unit == unit { return checkedUnit.isName }
        let isName = FleetImport.isValidUnitName(unit)
        checkedUnit = (unit, isName)
        return isName
    }

    /// Writes the operations of the message last given to ``prepare(_:)``: to the live subject, and for a retained
    /// message or a clear to the stream of latest messages too.
    package func writePrepared(_ export: FleetExport, into buffer: inout ByteBuffer) {
        writeLive(export, into: &buffer)
        if export.kind != .notRetained { writeLatest(export, into: &buffer) }
    }

    /// Writes the message last given to ``prepare(_:)`` to its live subject, `<prefix>.<topic>`.
    package func writeLive(_ export: FleetExport, into buffer: inout ByteBuffer) {
        writeOperation(livePrefix, export.delivery, into: &buffer)
    }

    /// Writes the message last given to ``prepare(_:)`` to the stream of latest messages, `<prefix>-latest.<topic>`.
    package func writeLatest(_ export: FleetExport, into buffer: inout ByteBuffer) {
        writeOperation(latestPrefix, export.delivery, into: &buffer)
    }

    private func writeOperation(_ prefix: [UInt8], _ message: Delivery, into buffer: inout ByteBuffer) {
        let headerSize = headers.readableBytes
        buffer.writeBytes(prefix)
        buffer.writeString(message.topic.name)
        buffer.writeStaticString(" ")
        buffer.writeDecimal(UInt64(headerSize))
        buffer.writeStaticString(" ")
        buffer.writeDecimal(UInt64(headerSize + message.payload.readableBytes))
        buffer.writeStaticString("\r\n")
        buffer.writeImmutableBuffer(headers)
        buffer.writeImmutableBuffer(message.payload)
        buffer.writeStaticString("\r\n")
    }
}
