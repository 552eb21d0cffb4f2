import NIOCore
import NotifyProtocol

/// Reading a log at start: both formats, the search past damage, and what is made of the records found.
extension StateLog {
    /// The bytes a log of format 2 starts with: its first line, then its key.
    static func fileHeader(_ key: RecordKey) -> ByteBuffer {
        var header = ByteBuffer(bytes: StateLog.header)
        header.writeInteger(key.k0, endianness: .little)
        header.writeInteger(key.k1, endianness: .little)
        return header
    }

    /// What ``load(_:into:maxBody:)`` found besides the topics.
    struct Loaded {
        /// The key of a format 2 log whose header could be read.
        var key: RecordKey?
        /// How many leading bytes hold the header and whole records: where appends may go on.
        var intactSize = 0
        /// Whether only zeros follow the records: space a running daemon had prepared for its tail (``LogTail``),
        /// left by a crash; nothing was lost in it.
        var zeroTail = false
    }

    /// Applies the intact records of `bytes` to `contents`.
    ///
    /// In a format 2 log, a search past damage for the next intact record is safe: a record's body holds a client's
    /// payload byte for byte, but its seal needs the log's key, which no client has. A format 1 log (checksums
    /// anyone can compute) is read up to its first damage only, since there a "record" found past damage could be a
    /// client's payload posing as one (a forged `system.…` message from uid 0, say). A record cut short at the very
    /// end (no intact record after it) is a write a crash interrupted, not damage.
    static func load(_ bytes: ByteBuffer, into contents: inout Contents, maxBody: Int) -> Loaded {
        let start = bytes.readerIndex
        let format: StateRecord.Format
        var loaded = Loaded()
        var offset: Int
        if bytes.readableBytes >= header.count + 16, bytes.getBytes(at: start, length: header.count) == header {
            let key = RecordKey(
                k0: bytes.getInteger(at: start + header.count, endianness: .little)!,
                k1: bytes.getInteger(at: start + header.count + 8, endianness: .little)!
            )
            format = .sealed(key)
            loaded.key = key
            offset = start + header.count + 16
        } else if bytes.readableBytes >= firstHeader.count, bytes.getBytes(at: start, length: firstHeader.count) == firstHeader {
            format = .checksummed
            offset = start + firstHeader.count
        } else {
            contents.problems.append("the file does not start with the notifyd state header")
            return loaded
        }
        var decoder = ServerFrameDecoder(maxPayload: maxBody)
        var lostBytes = 0
        // Where the zeros a daemon prepared its tail with begin, found (once) when the first record fails to read.
        var zerosFrom: Int?
        while offset < bytes.writerIndex {
            let read = StateRecord.read(bytes, at: offset, maxBodySize: maxBody, format: format)
            if case .record(let record, let size) = read {
                apply(record, to: &contents, decoder: &decoder, offset: offset - start)
                offset += size
                continue
            }
            if zerosFrom == nil { zerosFrom = trailingZeros(of: bytes) }
            if case .sealed = format, let zeros = zerosFrom {
                if zeros <= offset {
                    loaded.zeroTail = true
                    break
                }
                // A record the crash cut short while it was being copied into the prepared space: its sealed
                // header (or a part of the header) and then zeros.
                let headerSize = format.headerSize
                if case .damaged(_, let extent) = read, zeros <= offset + (extent ?? headerSize) { break }
            }
            var searchFrom = offset + 1
            if case .damaged(_, let extent?) = read { searchFrom = offset + extent }
            let next = firstRecord(in: bytes, from: searchFrom, maxBody: maxBody, format: format)
            if case .truncated = read, next == nil {
                break
            }
            guard case .sealed = format else {
                contents.problems.append(
                    "the log (format 1) is damaged at offset \(offset - start): the \(bytes.writerIndex - offset) bytes from"
                        + " there were not loaded (in this format a record found past damage could be a client's payload"
                        + " posing as one); they stay in the damaged file, which is kept aside"
                )
                break
            }
            let end = next ?? bytes.writerIndex
            contents.problems.append(
                "the log is damaged at offset \(offset - start): the \(end - offset) bytes from there could not be read"
                    + (next == nil ? " (to the end of the file)" : ", reading went on after them")
                    + "; they stay in the damaged file, which is kept aside"
            )
            lostBytes += end - offset
            offset = end
        }
        if lostBytes > 0 { raiseSequences(in: &contents, pastRecordsLostIn: lostBytes) }
        loaded.intactSize = offset - start
        return loaded
    }

    /// Where the run of zero bytes that ends `bytes` starts (`writerIndex` when the last byte is not zero).
    private static func trailingZeros(of bytes: ByteBuffer) -> Int {
        bytes.withUnsafeReadableBytes { raw in
            var index = raw.count
            while index > 0 && raw[index - 1] == 0 { index -= 1 }
            return bytes.readerIndex + index
        }
    }

    /// Where the first intact record at or after `offset` starts, if one does.
    private static func firstRecord(in bytes: ByteBuffer, from offset: Int, maxBody: Int, format: StateRecord.Format) -> Int? {
        var candidate = offset
        while candidate < bytes.writerIndex {
            if bytes.getInteger(at: candidate, as: UInt8.self) == StateRecord.marker,
                case .record = StateRecord.read(bytes, at: candidate, maxBodySize: maxBody, format: format)
            {
                return candidate
            }
            candidate += 1
        }
        return nil
    }

    /// Raises every topic's sequence number past what records lost in `lostBytes` could have recorded: each lost
    /// record may have been a ceiling one ``sequenceReserve`` above the one before, so a topic may have given out
    /// numbers up to that many reserves above what was read. A gap in the numbers, never a repeat.
    private static func raiseSequences(in contents: inout Contents, pastRecordsLostIn lostBytes: Int) {
        // The smallest record: a sequence record of a one-byte topic.
        let smallestRecord = StateRecord.Format.sealed(RecordKey(k0: 0, k1: 0)).headerSize + 9
        let (product, overflow) = UInt64(lostBytes / smallestRecord + 1).multipliedReportingOverflow(by: sequenceReserve)
        let raise = overflow ? largestSequence : product
        for name in contents.topics.keys {
            contents.topics[name]!.sequence = min(contents.topics[name]!.sequence.saturatingAdd(raise), largestSequence)
        }
        for name in contents.forgotten.keys where name != ForgottenTopics.unrememberedName {
            contents.forgotten[name]!.sequence = min(contents.forgotten[name]!.sequence.saturatingAdd(raise), largestSequence)
        }
    }

    /// The highest sequence number a log may give a topic: far beyond what a topic reaches, and far enough from
    /// `UInt64.max` that counting on from it (and the ceiling's reserve above it) cannot overflow.
    static let largestSequence: UInt64 = 1 << 62

    /// The message a record's `MSG` frame holds, if it is one and its sequence number is in range; else nil, and
    /// the problem noted.
    private static func message(
        _ frame: ByteBuffer,
        _ what: String,
        at offset: Int,
        decoder: inout ServerFrameDecoder,
        problems: inout [String]
    ) -> Delivery? {
        var input = frame
        guard case .delivery(let delivery)? = try? decoder.decode(buffer: &input), input.readableBytes == 0 else {
            problems.append("\(what) at offset \(offset) is not a message frame; skipped")
            return nil
        }
        guard delivery.sequence <= largestSequence else {
            problems.append("\(what) at offset \(offset) has sequence number \(delivery.sequence), out of range; skipped")
            return nil
        }
        return delivery
    }

    private static func apply(_ record: StateRecord, to contents: inout Contents, decoder: inout ServerFrameDecoder, offset: Int) {
        switch record {
        case .retained(let frame):
            guard let delivery = message(frame, "a buffered message", at: offset, decoder: &decoder, problems: &contents.problems) else {
                return
            }
            var topic = contents.topics[delivery.topic.name] ?? TopicRecord()
            topic.retainedFrame = frame
            topic.retainedInHistory = nil
            topic.sequence = max(topic.sequence, delivery.sequence)
            contents.topics[delivery.topic.name] = topic
        case .sequence(let name, let sequence):
            guard sequence <= largestSequence else {
                contents.problems.append("the sequence number \(sequence) of \(name) at offset \(offset) is out of range; skipped")
                return
            }
            contents.topics[name, default: TopicRecord()].sequence = max(contents.topics[name]?.sequence ?? 0, sequence)
        case .cleared(let name):
            contents.topics[name]?.retainedFrame = nil
            contents.topics[name]?.retainedInHistory = nil
        case .retainedInHistory(let name, let sequence):
            // The newest of its history's frames so numbered before this record (a topic numbered again from 1 may
            // have older ones): the log writes a message's history record before marking it.
            guard let topic = contents.topics[name], let index = topic.historySequences.lastIndex(of: sequence) else {
                contents.problems.append("the buffered message of \(name) at offset \(offset) is its message \(sequence), which the log does not hold; skipped")
                return
            }
            contents.topics[name]!.retainedFrame = topic.history[index]
            contents.topics[name]!.retainedInHistory = index
        case .forgotten(let name, let sequence, let time):
            guard sequence <= largestSequence || name == ForgottenTopics.unrememberedName else {
                contents.problems.append("the forgotten topic \(name) at offset \(offset) has sequence number \(sequence), out of range; skipped")
                return
            }
            let known = contents.forgotten[name]
            if known.map({ $0.sequence <= sequence }) ?? true {
                contents.forgotten[name] = (sequence, PublishTime(microsecondsSinceEpoch: time))
            }
        case .history(let frame):
            guard let delivery = message(frame, "a history message", at: offset, decoder: &decoder, problems: &contents.problems) else {
                return
            }
            // In place: a copy of the record taken out and put back would copy its history at every record.
            contents.topics[delivery.topic.name, default: TopicRecord()].appendHistory(frame, sequence: delivery.sequence)
        }
    }
}
