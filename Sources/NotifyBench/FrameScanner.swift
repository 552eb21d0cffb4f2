public import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
public import NotifyBus

/// Counts the frames a benchmark connection receives, straight from its receive buffer: the lean counterpart of
/// ``ServerFrameDecoder`` for `notify bench`, which must not be slower than the daemon it measures.
///
/// A `MSG` frame costs a search for its line break, the size read backwards from the end of its line, and the
/// 8-byte numbering read from its payload (``BenchmarkPayload``): no topic is decoded, nothing is allocated. `DROP`,
/// `OK`, `PONG` and `ERR` are read in full (they are rare); other payload-free lines are skipped. A benchmark sends
/// no request whose reply carries a payload other than `MSG` (no `LATEST`, `TOPICS` or `STATS`).
public enum FrameScanner {
    /// The longest line accepted; as generous as ``ServerFrameDecoder``'s.
    static let maxLine = 64 * 1024

    private static let lineFeed = UInt8(ascii: "\n")
    private static let carriageReturn = UInt8(ascii: "\r")
    private static let space = UInt8(ascii: " ")

    /// Scans the complete frames in `buffer`'s readable bytes into `tally`, as arrived at `now`, and moves the
    /// reader index past them; an incomplete frame at the end stays for the next call.
    /// - Throws: ``ServerFrameDecoder/Malformed`` when the bytes are not frames of the protocol.
    public static func scan(_ buffer: inout ByteBuffer, into tally: inout DeliveryTally, at now: UInt64) throws(ServerFrameDecoder.Malformed) {
        let consumed = try buffer.withUnsafeReadableBytes { bytes throws(ServerFrameDecoder.Malformed) in
            try scan(bytes, into: &tally, at: now)
        }
        buffer.moveReaderIndex(forwardBy: consumed)
    }

    /// Scans the complete frames at the start of `bytes` into `tally`, as arrived at `now`.
    /// - Returns: the bytes the complete frames take.
    /// - Throws: ``ServerFrameDecoder/Malformed`` when the bytes are not frames of the protocol.
    public static func scan(
        _ bytes: UnsafeRawBufferPointer,
        into tally: inout DeliveryTally,
        at now: UInt64
    ) throws(ServerFrameDecoder.Malformed) -> Int {
        guard let base = bytes.baseAddress else { return 0 }
        let count = bytes.count
        var position = 0
        while position < count {
            guard let found = memchr(base + position, Int32(lineFeed), count - position) else {
                if count - position > maxLine { throw malformed("a line is longer than \(maxLine) bytes") }
                break
            }
            let lineFeedIndex = base.distance(to: UnsafeRawPointer(found))
            var lineEnd = lineFeedIndex
            if lineEnd > position && bytes[lineEnd - 1] == carriageReturn { lineEnd -= 1 }

            if lineEnd - position > 4 && bytes[position] == UInt8(ascii: "M") && bytes[position + 1] == UInt8(ascii: "S")
                && bytes[position + 2] == UInt8(ascii: "G") && bytes[position + 3] == space
            {
                // MSG <topic> <seq> <time> <uid> <pid> <unit> <size>: the size is the line's last token.
                var index = lineEnd
                var size = 0
                var multiplier = 1
                while index > position + 4 {
                    let digit = bytes[index - 1] &- UInt8(ascii: "0")
                    if digit >= 10 { break }
                    guard multiplier <= 1_000_000_000_000 else { throw malformed("a message size is too large") }
                    size += Int(digit) * multiplier
                    multiplier *= 10
                    index -= 1
                }
                guard index < lineEnd, bytes[index - 1] == space else {
                    throw malformed("bad message line \(LineScanner.quoted(bytes, position..<lineEnd))")
                }
                let payloadStart = lineFeedIndex + 1
                let payloadEnd = payloadStart + size
                let next: Int
                switch LineScanner.lineBreak(in: bytes, at: payloadEnd) {
                case .needMoreData: return position
                case .absent: throw malformed("a \(size)-byte payload is not followed by a line break")
                case .present(let length): next = payloadEnd + length
                }
                if size >= BenchmarkPayload.headerSize {
                    tally.recordDelivery(numbering: BenchmarkPayload.readNumbering(base + payloadStart), at: now)
                } else {
                    tally.recordUnnumberedDelivery(at: now)
                }
                position = next
                continue
            }
            try scanLine(bytes, position..<lineEnd, into: &tally, at: now)
            position = lineFeedIndex + 1
        }
        return position
    }

    /// Reads one line without a payload: `DROP`, `OK`, `PONG`, `ERR`, each perhaps after a request id; other lines
    /// (the greeting, verbs of newer servers) are skipped.
    private static func scanLine(
        _ bytes: UnsafeRawBufferPointer,
        _ line: Range<Int>,
        into tally: inout DeliveryTally,
        at now: UInt64
    ) throws(ServerFrameDecoder.Malformed) {
        var tokens = Tokenizer(bytes, from: line.lowerBound, to: line.upperBound)
        guard var verb = tokens.next() else { return }  // an empty line
        var id: UInt64?
        if bytes[verb.lowerBound] == LineScanner.hash {
            id = LineScanner.unsigned(bytes, verb.lowerBound + 1..<verb.upperBound)
            guard id != nil, let following = tokens.next() else {
                throw malformed("bad request id in \(LineScanner.quoted(bytes, line))")
            }
            verb = following
        }
        if LineScanner.equals(bytes, verb, "DROP") {
            guard tokens.next() != nil, let countRange = tokens.next(), let count = LineScanner.unsigned(bytes, countRange)
            else { throw malformed("bad DROP line \(LineScanner.quoted(bytes, line))") }
            tally.recordDrop(count: count, at: now)
        } else if LineScanner.equals(bytes, verb, "OK") {
            tally.recordConfirmation()
        } else if LineScanner.equals(bytes, verb, "PONG") {
            tally.recordPong()
        } else if LineScanner.equals(bytes, verb, "ERR") {
            guard let codeRange = tokens.next() else { throw malformed("ERR without a code") }
            let code = ErrorCode(rawValue: text(bytes, codeRange))
            tally.recordError(ProtocolError(code, text(bytes, tokens.rest()), requestID: id))
        }
    }

    private static func text(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) -> String {
        String(decoding: UnsafeRawBufferPointer(rebasing: bytes[range]), as: UTF8.self)
    }

    private static func malformed(_ reason: String) -> ServerFrameDecoder.Malformed {
        ServerFrameDecoder.Malformed(reason: reason)
    }
}
