import NIOCore
import NotifyBus

/// A message's `id` in the gateway's events and replies (ntfy's field, opaque to its clients): its publish time in
/// microseconds and its sequence number, each in base 36, joined by `-`. A client that passes it back as `?since=`
/// resumes after that message: exactly, for a stream of one topic named in full (by its number); from its time on,
/// for patterns, which may repeat messages published in the same instant (never lose one).
struct MessageID: Hashable, Sendable, CustomStringConvertible {
    var time: PublishTime
    var sequence: UInt64

    init(time: PublishTime, sequence: UInt64) {
        self.time = time
        self.sequence = sequence
    }

    /// Reads an id as ``description`` writes it; nil for anything else (each part at most 13 digits, as a 64-bit
    /// number has in base 36, and in range).
    init?(_ text: Substring) {
        guard let dash = text.firstIndex(of: "-") else { return nil }
        let timeDigits = text[..<dash]
        let sequenceDigits = text[text.index(after: dash)...]
        guard (1...13).contains(timeDigits.count), (1...13).contains(sequenceDigits.count),
            let time = UInt64(timeDigits, radix: 36), let sequence = UInt64(sequenceDigits, radix: 36)
        else { return nil }
        self.init(time: PublishTime(microsecondsSinceEpoch: time), sequence: sequence)
    }

    var description: String {
        var buffer = ByteBuffer()
        write(into: &buffer)
        return String(buffer: buffer)
    }

    /// Appends the id as ``description`` reads, without making a string: a stream writes one or two per message.
    func write(into buffer: inout ByteBuffer) {
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: 27) { room in
            var out = RawJSON(base: room.baseAddress!)
            out.id(self)
            return out.count
        }
    }
}
