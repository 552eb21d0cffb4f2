public import NIOCore

/// Which of the frames that carry a message to write: they share the line's layout.
public enum MessageFrameKind: Sendable {
    /// `MSG`: a delivery to a subscriber. Never carries a request id.
    case delivery
    /// `LAST`: the answer to `LATEST`.
    case latest
    /// `EXP <kind>`: a publish of this host's, to the fleet service that follows them (protocol 5). No request id.
    case export(FleetMessageKind)
    /// `IMPORT <kind>`: the fleet service's request to publish another host's message here (protocol 5); `replayed`
    /// writes `replay` or `replay-clear` (``FleetImport/replayed``).
    case fleetImport(FleetMessageKind, replayed: Bool)
}

extension ByteBuffer {
    /// Writes the greeting line.
    @discardableResult
    public mutating func writeGreeting(_ greeting: ServerGreeting) -> Int {
        writeStaticString("HELLO ") + writeString(greeting.server) + writeStaticString(" ")
            + writeDecimal(greeting.version)
            + writeStaticString(" max_payload=") + writeDecimal(UInt64(greeting.limits.maxPayload))
            + writeStaticString(" max_topic=") + writeDecimal(UInt64(greeting.limits.maxTopic))
            + writeStaticString(" max_line=") + writeDecimal(UInt64(greeting.limits.maxLine))
            + writeStaticString("\n")
    }

    /// Writes `OK`, with the value (the sequence number of an acknowledged publish) when there is one.
    @discardableResult
    public mutating func writeOK(requestID: UInt64?, value: UInt64? = nil) -> Int {
        var written = writeRequestID(requestID) + writeStaticString("OK")
        if let value { written += writeStaticString(" ") + writeDecimal(value) }
        return written + writeStaticString("\n")
    }

    /// Writes `PONG`.
    @discardableResult
    public mutating func writePong(requestID: UInt64?) -> Int {
        writeRequestID(requestID) + writeStaticString("PONG\n")
    }

    /// Writes `ERR <code> <sentence>`; control characters in the sentence become spaces so it stays one line.
    @discardableResult
    public mutating func writeError(_ error: ProtocolError) -> Int {
        var written = writeRequestID(error.requestID) + writeStaticString("ERR ") + writeString(error.code.rawValue)
        written += writeStaticString(" ")
        for byte in error.message.utf8 {
            written += writeInteger(byte < 0x20 || byte == 0x7F ? LineScanner.space : byte)
        }
        return written + writeStaticString("\n")
    }

    /// Writes a `MSG` frame for `delivery`.
    @discardableResult
    public mutating func writeDelivery(_ delivery: Delivery) -> Int {
        writeMessageFrame(.delivery, requestID: nil, delivery)
    }

    /// Writes a `LAST` frame for `delivery`, answering the `LATEST` request `requestID`.
    @discardableResult
    public mutating func writeLatest(requestID: UInt64?, _ delivery: Delivery) -> Int {
        writeMessageFrame(.latest, requestID: requestID, delivery)
    }

    private mutating func writeMessageFrame(_ kind: MessageFrameKind, requestID: UInt64?, _ delivery: Delivery) -> Int {
        writeMessageFrame(
            kind,
            requestID: requestID,
            topic: delivery.topic.name,
            sequence: delivery.sequence,
            time: delivery.time,
            publisher: delivery.publisher,
            payload: delivery.payload
        )
    }

    /// Writes a message frame from its parts, so the broker need not assemble a ``Delivery`` first.
    /// `requestID` is ignored for ``MessageFrameKind/delivery``.
    @discardableResult
    public mutating func writeMessageFrame(
        _ kind: MessageFrameKind,
        requestID: UInt64?,
        topic: String,
        sequence: UInt64,
        time: PublishTime,
        publisher: Publisher,
        payload: ByteBuffer
    ) -> Int {
        var lineStart = 0
        return payload.withUnsafeReadableBytes {
            writeMessageFrame(
                kind,
                requestID: requestID,
                topic: topic,
                sequence: sequence,
                time: time,
                uid: publisher.uid,
                pid: publisher.pid,
                unitField: publisher.unitField,
                payload: $0,
                lineStart: &lineStart
            )
        }
    }

    /// Writes a message frame with the publisher's unit already as its field on the line (``Publisher/unitField``),
    /// and the payload as bytes lent for the call (a `PUB` still in the buffer it was read into): the broker makes
    /// the field once per connection, not once per message. `lineStart` is set to the length of the line's start up
    /// to the publisher (``MessageLineStart``, for a `MSG` frame), which a history's record leaves out: known here
    /// without being measured again.
    @discardableResult
    package mutating func writeMessageFrame(
        _ kind: MessageFrameKind,
        requestID: UInt64?,
        topic: String,
        sequence: UInt64,
        time: PublishTime,
        uid: UInt32,
        pid: Int32,
        unitField: String,
        payload payloadBytes: UnsafeRawBufferPointer,
        lineStart: inout Int
    ) -> Int {
        // One bounds check and one copy for the whole frame: this runs once per publish, and writing it piece by
        // piece (a capacity and exclusivity check per piece) cost more than the rest of the encoding.
        var topic = topic
        var unit = unitField
        let maximum = ByteBuffer.maximumMessageFrameSize(topic: topic, unit: unit, payloadSize: payloadBytes.count)
        return topic.withUTF8 { topicBytes in
            unit.withUTF8 { unitBytes in
                writeWithUnsafeMutableBytes(minimumWritableBytes: maximum) { out in
                    var at = 0
                    switch kind {
                    case .delivery:
                        out.put("MSG ", at: &at)
                    case .latest:
                        out.putRequestID(requestID, at: &at)
                        out.put("LAST ", at: &at)
                    case .export(let exported):
                        out.put("EXP ", at: &at)
                        out.put(exported.word, at: &at)
                        out.put(" ", at: &at)
                    case .fleetImport(let imported, let replayed):
                        out.putRequestID(requestID, at: &at)
                        out.put("IMPORT ", at: &at)
                        if replayed { out.put("replay", at: &at) }
                        if replayed, imported == .clear { out.put("-", at: &at) }
                        if !replayed || imported == .clear { out.put(imported.word, at: &at) }
                        out.put(" ", at: &at)
                    }
                    out.putTopicSequenceAndTime(UnsafeRawBufferPointer(topicBytes), sequence, time.microsecondsSinceEpoch, at: &at)
                    lineStart = at
                    out.putDecimal(UInt64(uid), at: &at)
                    out.put(" ", at: &at)
                    // A pid the kernel could not map is 0; the wire has no signed numbers, so nothing below 0.
                    out.putDecimal(UInt64(max(pid, 0)), at: &at)
                    out.put(" ", at: &at)
                    out.put(UnsafeRawBufferPointer(unitBytes), at: &at)
                    out.put(" ", at: &at)
                    out.putDecimal(UInt64(payloadBytes.count), at: &at)
                    out.put("\n", at: &at)
                    out.put(payloadBytes, at: &at)
                    out.put("\n", at: &at)
                    return at
                }
            }
        }
    }

    /// A unit name, or `-`: only names that are one printable token can go on the line.

    /// Writes a `TOPICS` reply.
    @discardableResult
    public mutating func writeTopics(requestID: UInt64?, _ topics: [TopicInfo]) -> Int {
        var written = writeRequestID(requestID) + writeStaticString("TOPICS ") + writeDecimal(UInt64(topics.count))
        written += writeStaticString("\n")
        for info in topics {
            written += writeString(info.topic.name) + writeStaticString(" seq=") + writeDecimal(info.sequence)
            written += writeStaticString(" retained=")
            if let bytes = info.retainedBytes {
                written += writeDecimal(UInt64(bytes))
            } else {
                written += writeStaticString("-")
            }
            written += writeStaticString(" published=") + writeDecimal(info.published)
            written += writeStaticString(" delivered=") + writeDecimal(info.delivered)
            written += writeStaticString(" dropped=") + writeDecimal(info.dropped)
            if let time = info.lastPublished {
                written += writeStaticString(" time=") + writeDecimal(time.microsecondsSinceEpoch)
            }
            written += writeStaticString("\n")
        }
        return written
    }

    /// Writes `DROP <topic> <count> <first-seq> <last-seq> [reason=<reason>]`.
    @discardableResult
    public mutating func writeDropNotice(_ notice: DropNotice, requestID: UInt64? = nil) -> Int {
        var written = writeRequestID(requestID) + writeStaticString("DROP ") + writeString(notice.topic.name) + writeStaticString(" ")
            + writeDecimal(notice.count) + writeStaticString(" ") + writeDecimal(notice.firstSequence) + writeStaticString(" ")
            + writeDecimal(notice.lastSequence)
        // A reason is one token of its own: anything else would break the line.
        if let reason = notice.reason, !reason.rawValue.isEmpty, reason.rawValue.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) {
            written += writeStaticString(" reason=") + writeString(reason.rawValue)
        }
        return written + writeStaticString("\n")
    }

    /// Writes a `STATS` reply. Names must be single tokens.
    @discardableResult
    public mutating func writeStats(requestID: UInt64?, _ stats: ServerStats) -> Int {
        var written = writeRequestID(requestID) + writeStaticString("STATS ")
        written += writeDecimal(UInt64(stats.counters.count)) + writeStaticString("\n")
        for counter in stats.counters {
            written += writeString(counter.name) + writeStaticString(" ") + writeDecimal(counter.value)
            written += writeStaticString("\n")
        }
        return written
    }

    /// Writes an `EXPLAIN` reply: `EXPLAIN <uid> <count>`, then `<access> allow|deny <rule>` lines.
    @discardableResult
    public mutating func writeExplanation(requestID: UInt64?, _ explanation: AccessExplanation) -> Int {
        var written = writeRequestID(requestID) + writeStaticString("EXPLAIN ") + writeDecimal(UInt64(explanation.uid))
        written += writeStaticString(" ") + writeDecimal(UInt64(explanation.decisions.count)) + writeStaticString("\n")
        for decision in explanation.decisions {
            written += writeString(decision.access) + writeStaticString(decision.isAllowed ? " allow " : " deny ")
            // A rule's text is one line: a line break in it would end the frame early.
            written += writeString(decision.rule.replacingLineBreaks()) + writeStaticString("\n")
        }
        return written
    }

    /// Writes any server frame.
    @discardableResult
    public mutating func writeServerFrame(_ frame: ServerFrame) -> Int {
        switch frame {
        case .hello(let greeting): return writeGreeting(greeting)
        case .ok(let id, let value): return writeOK(requestID: id, value: value)
        case .pong(let id): return writePong(requestID: id)
        case .error(let error): return writeError(error)
        case .delivery(let delivery): return writeDelivery(delivery)
        case .latest(let id, let delivery): return writeLatest(requestID: id, delivery)
        case .topics(let id, let topics): return writeTopics(requestID: id, topics)
        case .stats(let id, let stats): return writeStats(requestID: id, stats)
        case .explanation(let id, let explanation): return writeExplanation(requestID: id, explanation)
        case .dropped(let notice): return writeDropNotice(notice)
        case .missed(let id, let notice): return writeDropNotice(notice, requestID: id)
        case .export(let exported):
            let delivery = exported.delivery
            return writeMessageFrame(
                .export(exported.kind),
                requestID: nil,
                topic: delivery.topic.name,
                sequence: delivery.sequence,
                time: delivery.time,
                publisher: delivery.publisher,
                payload: delivery.payload
            )
        }
    }
}

extension ByteBuffer {
    /// The most bytes ``writeMessageFrame(_:requestID:topic:sequence:time:publisher:payload:)`` writes: the
    /// variable parts, and room for the verb, a request id, five numbers and the separators.
    package static func maximumMessageFrameSize(topic: String, unit: String?, payloadSize: Int) -> Int {
        topic.utf8.count + max(1, unit?.utf8.count ?? 1) + payloadSize + 140
    }
}

extension Publisher {
    /// What stands for the unit on a message's line: the unit when it is one printable token, else `-`; after the
    /// origin host and a `/` for a message from another host.
    package var unitField: String {
        let unit = Publisher.isWritableUnit(self.unit) ? self.unit! : "-"
        guard let host else { return unit }
        return host + "/" + unit
    }

    /// Whether `unit` can go on a frame's line as it is: a token without blanks or control characters, and not
    /// the `-` that stands for "no unit".
    package static func isWritableUnit(_ unit: String?) -> Bool {
        guard let unit, !unit.isEmpty, unit != "-" else { return false }
        return unit.utf8.allSatisfy { $0 > 0x20 && $0 != 0x7F }
    }
}

/// The start of a `MSG` frame's line, `MSG <topic> <seq> <time> `: what a topic's history leaves out of each frame
/// it keeps, as its record holds the number and time and the topic is the history's own (``TopicHistory``). Written
/// by the same code as a delivery's, so a frame put back together is the frame that was delivered.
package enum MessageLineStart {
    /// Its length in bytes.
    package static func length(topicLength: Int, sequence: UInt64, time: UInt64) -> Int {
        7 + topicLength + decimalDigits(sequence) + decimalDigits(time)
    }

    /// Writes it at the start of `out`, which has room for ``length(topicLength:sequence:time:)`` bytes.
    /// - Returns: the bytes written.
    package static func write(topic: UnsafeRawBufferPointer, sequence: UInt64, time: UInt64, into out: UnsafeMutableRawBufferPointer) -> Int {
        var at = 0
        out.put("MSG ", at: &at)
        out.putTopicSequenceAndTime(topic, sequence, time, at: &at)
        return at
    }

    /// How many bytes at the start of `frame` are the line start of `topic`, `sequence` and `time` exactly as
    /// ``write(topic:sequence:time:into:)`` writes it; 0 when they are not. Read, not written and compared: it runs
    /// for every message a history keeps, and writing a number costs a division per digit.
    package static func length(in frame: UnsafeRawBufferPointer, topic: UnsafeRawBufferPointer, sequence: UInt64, time: UInt64) -> Int {
        let keyword: StaticString = "MSG "
        let keywordBytes = UnsafeRawBufferPointer(start: keyword.utf8Start, count: keyword.utf8CodeUnitCount)
        guard let start = frame.baseAddress, frame.count > keywordBytes.count + topic.count,
            ByteKey.equalBytes(UnsafeRawBufferPointer(start: start, count: keywordBytes.count), keywordBytes),
            ByteKey.equalBytes(UnsafeRawBufferPointer(start: start + keywordBytes.count, count: topic.count), topic)
        else { return 0 }
        let space = UInt8(ascii: " ")
        let afterTopic = keywordBytes.count + topic.count
        guard frame[afterTopic] == space, let afterSequence = endOfDecimal(sequence, in: frame, from: afterTopic + 1),
            afterSequence < frame.count, frame[afterSequence] == space,
            let afterTime = endOfDecimal(time, in: frame, from: afterSequence + 1),
            afterTime < frame.count, frame[afterTime] == space, afterTime + 1 <= Int(UInt16.max)
        else { return 0 }
        return afterTime + 1
    }

    /// Where the digits at `start` end, if they are `value` in decimal as the encoder writes it (no leading zero).
    private static func endOfDecimal(_ value: UInt64, in frame: UnsafeRawBufferPointer, from start: Int) -> Int? {
        let end = start + decimalDigits(value)
        guard end <= frame.count, frame[start] != UInt8(ascii: "0") || end == start + 1 else { return nil }
        var parsed: UInt64 = 0
        for index in start..<end {
            let digit = frame[index] &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            // Twenty digits can go past 64 bits, and a number that wrapped could read as `value`.
            let (tens, overflow) = parsed.multipliedReportingOverflow(by: 10)
            let (sum, carry) = tens.addingReportingOverflow(UInt64(digit))
            guard !overflow, !carry else { return nil }
            parsed = sum
        }
        // A digit after them would make another number.
        guard parsed == value, end == frame.count || !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(frame[end]) else { return nil }
        return end
    }

    /// Counted by multiplying, not dividing: it runs for the messages each batch's histories keep.
    package static func decimalDigits(_ value: UInt64) -> Int {
        var digits = 1
        var bound: UInt64 = 10
        while value >= bound {
            digits += 1
            guard digits < 20 else { return 20 }  // 10^19 is the last power of ten below 2^64
            bound &*= 10
        }
        return digits
    }
}

extension UnsafeMutableRawBufferPointer {
    /// Writes `<topic> <sequence> <time> ` at `at`, and moves `at` past it: the part of a message frame's line that
    /// follows its keyword.
    @inline(__always)
    fileprivate func putTopicSequenceAndTime(_ topic: UnsafeRawBufferPointer, _ sequence: UInt64, _ time: UInt64, at: inout Int) {
        put(topic, at: &at)
        put(" ", at: &at)
        putDecimal(sequence, at: &at)
        put(" ", at: &at)
        putDecimal(time, at: &at)
        put(" ", at: &at)
    }

    /// Copies `bytes` to `at`, and moves `at` past them.
    @inline(__always)
    fileprivate func put(_ bytes: UnsafeRawBufferPointer, at: inout Int) {
        guard let source = bytes.baseAddress, bytes.count > 0 else { return }
        (baseAddress! + at).copyMemory(from: source, byteCount: bytes.count)
        at += bytes.count
    }

    @inline(__always)
    fileprivate func putRequestID(_ requestID: UInt64?, at: inout Int) {
        guard let requestID else { return }
        put("#", at: &at)
        putDecimal(requestID, at: &at)
        put(" ", at: &at)
    }

    fileprivate func put(_ text: StaticString, at: inout Int) {
        put(UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount), at: &at)
    }

    /// Writes `value` in decimal at `at`, and moves `at` past it: two digits per division, from a table of the
    /// hundred pairs, as every frame carries a 16-digit time.
    @inline(__always)
    fileprivate func putDecimal(_ value: UInt64, at: inout Int) {
        let digits = MessageLineStart.decimalDigits(value)
        let pairs = DecimalPairs.text.utf8Start
        var remaining = value
        var index = at + digits
        while remaining >= 100 {
            let pair = Int(remaining % 100) &* 2
            remaining /= 100
            index -= 2
            self[index] = pairs[pair]
            self[index + 1] = pairs[pair + 1]
        }
        if remaining >= 10 {
            let pair = Int(remaining) &* 2
            self[at] = pairs[pair]
            self[at + 1] = pairs[pair + 1]
        } else {
            self[at] = UInt8(truncatingIfNeeded: remaining) &+ UInt8(ascii: "0")
        }
        at += digits
    }
}

/// The hundred two-digit numbers, `00` to `99`, back to back.
private enum DecimalPairs {
    static let text: StaticString = """
        00010203040506070809101112131415161718192021222324252627282930313233343536373839\
        40414243444546474849505152535455565758596061626364656667686970717273747576777879\
        8081828384858687888990919293949596979899
        """
}

extension String {
    fileprivate func replacingLineBreaks() -> String {
        guard utf8.contains(where: { $0 == 0x0A || $0 == 0x0D }) else { return self }
        return String(map { $0 == "\n" || $0 == "\r" ? " " : $0 })
    }
}
