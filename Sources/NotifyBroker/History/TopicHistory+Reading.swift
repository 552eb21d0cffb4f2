import NIOCore
import NotifyProtocol

/// What resumes, `HISTORY` and the state log read of a history: entries after a sequence number or a time, the last
/// few, and their frames, rebuilt from the records.
extension TopicHistory {
    /// The sequence number of the oldest message kept after `sequence`.
    func firstSequence(after sequence: UInt64) -> UInt64? {
        var first: UInt64?
        forEachNewestFirst { entry in
            guard entry.sequence > sequence else { return false }
            first = entry.sequence
            return true
        }
        return first
    }

    /// The message numbered `sequence`, if it is kept. Looked for from the newest back: the one asked for is the
    /// topic's buffered message (``TopicState/retainedInHistory``), nearly always the newest.
    func entry(sequence: UInt64) -> Entry? {
        var found: Entry?
        forEachNewestFirst { entry in
            guard entry.sequence >= sequence else { return false }
            if entry.sequence == sequence { found = entry }
            return found == nil
        }
        return found
    }

    /// The sequence number of the oldest message kept.
    var oldestSequence: UInt64? { count > 0 ? entry(at: head).sequence : nil }

    /// The sequence number of the newest message kept.
    var newestSequence: UInt64? { count > 0 ? entry(at: recordBefore(position(head, plus: used))).sequence : nil }

    /// Whether the message numbered `sequence` is still kept.
    func contains(_ sequence: UInt64) -> Bool {
        guard let first = oldestSequence, let last = newestSequence else { return false }
        return first <= sequence && sequence <= last
    }

    /// Calls `body` with each message kept whose sequence number is above `sequence`, oldest first, with its frame
    /// (see ``withFrame(of:topic:_:)``; valid during the call only).
    func forEach(after sequence: UInt64, topic: String, _ body: (Entry, UnsafeRawBufferPointer) -> Void) {
        forEachEntry(after: sequence) { entry in withFrame(of: entry, topic: topic) { body(entry, $0) } }
    }

    /// Calls `body` with each message kept whose sequence number is above `sequence`, oldest first.
    func forEachEntry(after sequence: UInt64, _ body: (Entry) -> Void) {
        // Found from the newest back: a commit asks for the few kept since the last one.
        var start = position(head, plus: used)
        var newer = 0
        forEachNewestFirst { entry in
            guard entry.sequence > sequence else { return false }
            start = entry.record
            newer += 1
            return true
        }
        forEachOldestFirst(from: start, count: newer, body)
    }

    /// Appends the frame of `entry`, a message of this history's `topic`, to `buffer`: what ``withFrame(of:topic:_:)``
    /// gives, written where it goes instead of put together in a copy first (the state log's records).
    func writeFrame(of entry: Entry, topic: String, into buffer: inout ByteBuffer) {
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: entry.length) { out in
            copyFrame(of: entry, topic: topic, into: out)
            return entry.length
        }
    }

    /// Calls `body` with each message kept published after `time`, oldest first, with its frame (see
    /// ``withFrame(of:topic:_:)``).
    func forEach(after time: PublishTime, topic: String, _ body: (Entry, UnsafeRawBufferPointer) -> Void) {
        forEachOldestFirst(from: head, count: count) { entry in
            if entry.time > time { withFrame(of: entry, topic: topic) { body(entry, $0) } }
        }
    }

    /// Calls `body` with up to `count` of the messages kept (all for nil), newest first, until it returns false.
    func forEach(newestFirst count: Int?, _ body: (Entry) -> Bool) {
        var left = count ?? self.count
        forEachNewestFirst { entry in
            guard left > 0 else { return false }
            left -= 1
            return body(entry)
        }
    }

    /// The last `count` messages kept (all of them for nil), oldest first, with their frames.
    func forEach(last count: Int?, topic: String, _ body: (Entry, UnsafeRawBufferPointer) -> Void) {
        let wanted = Swift.min(count ?? self.count, self.count)
        var start = position(head, plus: used)
        forEach(newestFirst: wanted) { entry in
            start = entry.record
            return true
        }
        forEachOldestFirst(from: start, count: wanted) { entry in withFrame(of: entry, topic: topic) { body(entry, $0) } }
    }

    /// Calls `body` with the frame of `entry`, a message of this history's `topic`, put back together: the start
    /// of its line written again before what the record holds, in a copy (in place where the record holds a whole
    /// frame in one piece).
    func withFrame<Result>(of entry: Entry, topic: String, _ body: (UnsafeRawBufferPointer) -> Result) -> Result {
        let start = position(entry.record, plus: TopicHistory.headerSize)
        if entry.lineStart == 0, entry.stored <= ring.count - start {
            return body(UnsafeRawBufferPointer(rebasing: ring[start..<(start + entry.stored)]))
        }
        return withUnsafeTemporaryAllocation(byteCount: entry.length, alignment: 1) { copy in
            copyFrame(of: entry, topic: topic, into: copy)
            return body(UnsafeRawBufferPointer(copy))
        }
    }

    /// Writes the frame of `entry`, a message of this history's `topic`, at the start of `out` (room for at least
    /// `entry.length` bytes): the start of its line, if the record left it out, then what the record holds.
    private func copyFrame(of entry: Entry, topic: String, into out: UnsafeMutableRawBufferPointer) {
        if entry.lineStart > 0 {
            var topic = topic
            let time = entry.time.microsecondsSinceEpoch
            // Checked before writing: another topic's name would write past the room the record's sizes make.
            precondition(
                MessageLineStart.length(topicLength: topic.utf8.count, sequence: entry.sequence, time: time) == entry.lineStart,
                "a history's frames put back together with another topic's name"
            )
            _ = topic.withUTF8 { name in
                MessageLineStart.write(topic: UnsafeRawBufferPointer(name), sequence: entry.sequence, time: time, into: out)
            }
        }
        load(
            into: UnsafeMutableRawBufferPointer(start: out.baseAddress! + entry.lineStart, count: entry.stored),
            from: position(entry.record, plus: TopicHistory.headerSize)
        )
    }

}
