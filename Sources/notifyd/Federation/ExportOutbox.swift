import DequeModule
import NIOCore

/// The messages the bridge owes NATS, oldest first, each kept until the server confirmed it (a `PONG` after it):
/// sent while connected, kept while not, sent again after a reconnect if a connection was lost before the
/// confirmation (so at least once; receivers drop the repeats by origin and sequence).
///
/// Bounded in bytes: a message that does not fit is refused and counted, never queued past the bound, and nothing
/// queued is ever dropped to make room (what was accepted is sent in order).
struct ExportOutbox {
    /// The most bytes of encoded messages held.
    var limit: Int
    /// Messages held, the sent ones first.
    private var entries = Deque<ByteBuffer>()
    /// The number of the oldest held message, counting every message ever accepted from 0.
    private var headNumber: UInt64 = 0
    /// The number of the first message not sent yet on the current connection.
    private(set) var sentThrough: UInt64 = 0
    /// Bytes held.
    private(set) var bytes = 0
    /// Messages refused because they did not fit.
    private(set) var dropped: UInt64 = 0
    /// Messages the server confirmed.
    private(set) var confirmed: UInt64 = 0

    init(limit: Int) {
        self.limit = limit
    }

    /// Messages held, sent or not.
    var count: Int { entries.count }

    /// Whether messages wait to be sent.
    var hasUnsent: Bool { sentThrough < headNumber + UInt64(entries.count) }

    /// Holds `message` (one or more encoded operations) after the others, or refuses it when the bound would be
    /// passed: false, and it is counted in ``dropped``.
    mutating func append(_ message: ByteBuffer) -> Bool {
        guard bytes + message.readableBytes <= limit else {
            dropped += 1
            return false
        }
        entries.append(message)
        bytes += message.readableBytes
        return true
    }

    /// The oldest message not sent yet, now counted as sent.
    mutating func nextUnsent() -> ByteBuffer? {
        guard hasUnsent else { return nil }
        let message = entries[Int(sentThrough - headNumber)]
        sentThrough += 1
        return message
    }

    /// Lets go of every message numbered before `number`: the server confirmed them.
    mutating func confirm(through number: UInt64) {
        while headNumber < number, let first = entries.popFirst() {
            bytes -= first.readableBytes
            headNumber += 1
            confirmed += 1
        }
        sentThrough = max(sentThrough, headNumber)
    }

    /// The connection was lost: what was sent and not confirmed is sent again on the next one.
    mutating func resendUnconfirmed() {
        sentThrough = headNumber
    }
}
