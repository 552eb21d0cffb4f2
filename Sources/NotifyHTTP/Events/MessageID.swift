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
        MessageID.writeBase36(time.microsecondsSinceEpoch, into: &buffer)
        buffer.writeStaticString("-")
        MessageID.writeBase36(sequence, into: &buffer)
    }

    private static func writeBase36(_ value: UInt64, into buffer: inout ByteBuffer) {
        var digits: (UInt64, UInt64) = (0, 0)  // 16 bytes: room for the 13 digits of UInt64.max in base 36
        withUnsafeMutableBytes(of: &digits) { bytes in
            var at = bytes.count
            var rest = value
            repeat {
                at -= 1
                let digit = UInt8(rest % 36)
                bytes[at] = digit < 10 ? UInt8(ascii: "0") + digit : UInt8(ascii: "a") + digit - 10
                rest /= 36
            } while rest > 0
            buffer.writeBytes(UnsafeRawBufferPointer(rebasing: bytes[at...]))
        }
    }
}
