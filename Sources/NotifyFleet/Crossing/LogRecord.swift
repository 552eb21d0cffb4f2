package import NATSClient
package import NIOCore

/// A record of an origin's log (`<prefix>_log.<host>`): one outbox chunk, the very `HPUB` operations that went out
/// live, stored as one JetStream message. Reading one back gives the live messages in it, in order; the copies for
/// the stream of latest messages in it are skipped.
///
/// The bytes come from NATS, where any client of the fleet's account may write to a log subject: every length is
/// checked against what is left before it is used, and a record that does not parse is refused whole.
package enum LogRecord {
    /// Calls `body` with each message of `record` published under `subjectPrefix` (`<prefix>.`), in order. Returns
    /// false, having called `body` for none, when the record is not a run of well-formed `HPUB` operations.
    @discardableResult
    package static func forEachMessage(in record: ByteBuffer, under subjectPrefix: String, _ body: (NATSMessage) -> Void) -> Bool {
        guard let operations = parse(record) else { return false }
        for operation in operations where operation.subject.utf8.starts(with: subjectPrefix.utf8) {
            body(NATSMessage(subject: operation.subject, sid: "", headers: operation.headers, payload: operation.payload))
        }
        return true
    }

    private struct Operation {
        var subject: String
        var headers: NATSHeaders
        var payload: ByteBuffer
    }

    private static let operationName = Array("HPUB ".utf8)
    /// A control line is short: the subject (at most a topic and a prefix) and two numbers.
    private static let longestControlLine = 4_096

    private static func parse(_ record: ByteBuffer) -> [Operation]? {
        var operations: [Operation] = []
        var rest = record
        while rest.readableBytes > 0 {
            let view = rest.readableBytesView
            guard view.starts(with: operationName) else { return nil }
            let searched = view.prefix(longestControlLine)
            guard let cr = searched.firstIndex(of: UInt8(ascii: "\r")), cr + 1 < view.endIndex, view[cr + 1] == UInt8(ascii: "\n") else {
                return nil
            }
            let fields = view[(view.startIndex + operationName.count)..<cr].split(separator: UInt8(ascii: " "))
            // HPUB <subject> <header size> <total size>: no reply subject in a record.
            guard fields.count == 3, let headerSize = decimal(fields[1]), let totalSize = decimal(fields[2]), headerSize <= totalSize
            else { return nil }
            let bodyStart = cr + 2 - view.startIndex
            // The body and its CRLF must be there.
            guard totalSize <= rest.readableBytes - bodyStart - 2 else { return nil }
            let bodyAt = rest.readerIndex + bodyStart
            guard rest.getBytes(at: bodyAt + totalSize, length: 2) == [UInt8(ascii: "\r"), UInt8(ascii: "\n")],
                let headers = NATSHeaders(parsing: rest.getSlice(at: bodyAt, length: headerSize)!)
            else { return nil }
            operations.append(
                Operation(
                    subject: String(decoding: Array(fields[0]), as: UTF8.self),
                    headers: headers,
                    payload: rest.getSlice(at: bodyAt + headerSize, length: totalSize - headerSize)!
                )
            )
            rest.moveReaderIndex(forwardBy: bodyStart + totalSize + 2 as Int)
        }
        return operations
    }

    /// 1 to 9 digits: a size within any record.
    private static func decimal(_ digits: some Collection<UInt8>) -> Int? {
        guard !digits.isEmpty, digits.count <= 9 else { return nil }
        var value = 0
        for digit in digits {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(digit) else { return nil }
            value = value * 10 + Int(digit - UInt8(ascii: "0"))
        }
        return value
    }
}
