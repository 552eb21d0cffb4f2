import DequeModule
package import NIOCore

/// The messages the bridge owes NATS, oldest first, each kept until the server confirmed it (a `PONG` after it):
/// sent while connected, kept while not, sent again after a reconnect if a connection was lost before the
/// confirmation (so at least once; receivers drop the repeats by origin and sequence).
///
/// Messages are encoded into chunks of about 64 KiB, each written whole and confirmed whole: no buffer and no queue
/// entry per message. With a log, a chunk is also the payload of one record of it, and is confirmed by the record's
/// JetStream acknowledgement (``acknowledge(_:)``); without, by the `PONG` after it (``confirm(through:)``).
///
/// Bounded in bytes: a message that does not fit is refused and counted, never queued past the bound, and nothing
/// queued is dropped to make room (what was accepted is sent in order). Each uid has a share of it
/// (``shareLimit(holding:)``): a flood from one user, or a few, during an outage leaves room for everyone else's.
package struct ExportOutbox {
    /// The most bytes of encoded messages held.
    package var limit: Int
    /// A chunk of encoded messages.
    private struct Chunk {
        var bytes: ByteBuffer
        /// The messages in it: what ``count`` and ``confirmed`` count.
        var messages: Int
        /// Its entries: the messages and the writes to the stream of latest messages that go with them.
        var entries = 0
        /// The bytes of its publishers' (uids') messages, one run per uid in a row: let go of when it is confirmed.
        /// Runs rather than a table: a message of the same uid as the one before, the usual case, costs no hashing.
        var runs: [(uid: UInt32, bytes: Int)] = []
        /// The largest tag of its messages (``append(uid:isMessage:tag:encode:)``).
        var tag: UInt64 = 0
    }
    /// The bytes held of each publisher's (uid's) messages.
    private var bytesByUID: [UInt32: Int] = [:]
    /// Sealed chunks, oldest first; the first `sentChunks` of them are written on the current connection.
    private var chunks = Deque<Chunk>()
    private var sentChunks = 0
    /// The chunk being filled.
    private var open = ExportOutbox.emptyChunk()
    /// The number of the oldest sealed chunk, counting every chunk ever sealed from 0.
    private var headNumber: UInt64 = 0
    /// Bytes held, in sealed chunks and the open one.
    package private(set) var bytes = 0
    /// Messages held.
    package private(set) var count = 0
    /// Messages refused because they did not fit, in the outbox or in their uid's share.
    package private(set) var dropped: UInt64 = 0
    /// Of those, the ones refused for their uid's share while the outbox had room.
    package private(set) var droppedOverShare: UInt64 = 0
    /// Whether the last message refused was refused for its uid's share (the outbox had room).
    package private(set) var lastRefusalWasShare = false
    /// Messages the server confirmed.
    package private(set) var confirmed: UInt64 = 0
    /// The largest tag of the messages confirmed: with the log, the export number every one up to which is stored.
    package private(set) var confirmedTag: UInt64 = 0
    /// The most bytes a chunk holds, unless one message alone is larger: a record of the log is one chunk, and must
    /// stay within the server's `max_payload`.
    package var largestChunk = Int.max
    /// Numbers of sent chunks acknowledged while an older one was not yet: confirmed once every one before is.
    private var acknowledgedAhead = Set<UInt64>()

    /// A chunk is sealed once it holds this many bytes, so a write is about this large.
    package static let chunkBytes = 64 << 10

    package init(limit: Int) {
        self.limit = limit
    }

    /// The number after the last chunk written: what a confirmation asked for now covers.
    package var sentThrough: UInt64 { headNumber + UInt64(sentChunks) }

    /// Whether messages wait to be sent.
    package var hasUnsent: Bool { sentChunks < chunks.count || open.entries > 0 }

    /// The most bytes one uid's messages may hold while `uids` uids hold some, itself included: an equal part of the
    /// outbox with one part kept for a uid not in it yet (half of it for the only one, a third each for two, …).
    package func shareLimit(holding uids: Int) -> Int { max(1, limit / (uids + 1)) }

    /// Appends one message of `uid`'s, which `encode` writes, after the others; or refuses it when the bound or the
    /// uid's share would be passed: false, and it is counted in ``dropped``. `isMessage` false: a write that goes with
    /// a message sent already (its copy for the stream of latest messages), held and confirmed like one but not
    /// counted as another message.
    /// `tag`: a number the caller gives the message (its export number), reported back by ``confirmedTag``.
    package mutating func append(
        uid: UInt32,
        isMessage: Bool = true,
        tag: UInt64 = 0,
        countsRefusal: Bool = true,
        encode: (inout ByteBuffer) -> Void
    ) -> Bool {
        let before = open.bytes.writerIndex
        encode(&open.bytes)
        let size = open.bytes.writerIndex - before
        let held = bytesByUID[uid] ?? 0
        // A uid that holds nothing may always send one message, however large, if the outbox has room for it.
        let withinShare = held == 0 || held + size <= shareLimit(holding: bytesByUID.count)
        guard bytes + size <= limit, withinShare else {
            open.bytes.moveWriterIndex(to: before)
            // A refusal the caller answers by waiting for room is no drop.
            guard countsRefusal else { return false }
            dropped += 1
            lastRefusalWasShare = bytes + size <= limit
            if lastRefusalWasShare { droppedOverShare += 1 }
            return false
        }
        if open.entries > 0, open.bytes.readableBytes > largestChunk {
            // The chunk would be too large for one record: this message starts the next.
            let message = open.bytes.getSlice(at: before, length: size)!
            open.bytes.moveWriterIndex(to: before)
            seal()
            open.bytes.writeImmutableBuffer(message)
        }
        bytesByUID[uid] = held + size
        if let last = open.runs.indices.last, open.runs[last].uid == uid {
            open.runs[last].bytes += size
        } else {
            open.runs.append((uid, size))
        }
        bytes += size
        open.entries += 1
        open.tag = max(open.tag, tag)
        if isMessage {
            count += 1
            open.messages += 1
        }
        if open.bytes.readableBytes >= Self.chunkBytes { seal() }
        return true
    }

    /// The oldest bytes not sent yet, now counted as sent: a chunk of whole messages.
    package mutating func nextUnsent() -> ByteBuffer? {
        if sentChunks == chunks.count { seal() }
        guard sentChunks < chunks.count else { return nil }
        sentChunks += 1
        return chunks[sentChunks - 1].bytes
    }

    /// Lets go of every chunk numbered before `number`: the server confirmed them.
    package mutating func confirm(through number: UInt64) {
        while headNumber < number, let first = chunks.popFirst() {
            for (uid, size) in first.runs {
                let left = bytesByUID[uid, default: 0] - size
                bytesByUID[uid] = left > 0 ? left : nil
            }
            bytes -= first.bytes.readableBytes
            count -= first.messages
            confirmed += UInt64(first.messages)
            confirmedTag = max(confirmedTag, first.tag)
            headNumber += 1
            sentChunks -= 1
        }
    }

    /// The number of the oldest chunk not confirmed: every one before it is.
    package var confirmedThrough: UInt64 { chunks.isEmpty && open.entries == 0 ? sentThrough : headNumber }

    /// Whether chunks were sent that are not confirmed yet.
    package var hasUnconfirmedSent: Bool { sentChunks > 0 }

    /// The number the last chunk ``nextUnsent()`` returned goes by, for ``acknowledge(_:)``.
    package var lastSentNumber: UInt64 { sentThrough - 1 }

    /// The server acknowledged chunk `number`'s record: it and every chunk before it that is acknowledged too are let
    /// go of. A number that is not of a chunk sent and held is ignored.
    package mutating func acknowledge(_ number: UInt64) {
        guard number >= headNumber, number < sentThrough else { return }
        acknowledgedAhead.insert(number)
        var through = headNumber
        while acknowledgedAhead.remove(through) != nil { through += 1 }
        confirm(through: through)
    }

    /// The connection was lost: what was sent and not confirmed is sent again on the next one.
    package mutating func resendUnconfirmed() {
        sentChunks = 0
        acknowledgedAhead.removeAll()
    }

    private mutating func seal() {
        guard open.entries > 0 else { return }
        chunks.append(open)
        open = Self.emptyChunk()
    }

    /// Room for a chunk's worth and a quarter more, so that the message that fills a chunk rarely makes its buffer
    /// double: the memory held stays near ``bytes``, which the bound counts.
    private static func emptyChunk() -> Chunk {
        Chunk(bytes: ByteBufferAllocator().buffer(capacity: chunkBytes + chunkBytes / 4), messages: 0)
    }
}
