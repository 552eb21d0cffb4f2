import NIOCore
import NotifyBus

/// A publisher's frames, encoded once and written in large batches: the C harness's method, so that publishing
/// costs the benchmark a header store per message and a `write` per batch, not an encoding per message.
///
/// The buffer holds `PUB` frames for the topics in turn (`bench.0`, `bench.1`, …, again), as many rounds as fit in
/// about the target size (at least one round). A publisher's message *k* goes to topic *k* mod *T*; every batch
/// starts at a message number that is a multiple of the frames per batch, a multiple of *T*, so the frames' topics
/// never need to change: only each payload's header is patched before the batch goes out.
struct PublishBatch {
    /// The frames, back to back.
    private var bytes: [UInt8]
    /// Where each frame's payload starts.
    private let payloadOffsets: [Int]
    /// Where each frame ends.
    private let frameEnds: [Int]
    /// Frames in a full batch.
    let framesPerBatch: Int
    /// The topics, in turn.
    let topicCount: Int
    /// Bytes of the batch being written, and how many of them have been.
    private(set) var length = 0
    private(set) var written = 0

    /// Encodes the frames of `topics` with `payloadSize`-byte payloads, in rounds up to about `targetBytes`.
    init(topics: [Topic], payloadSize: Int, retain: Bool, targetBytes: Int) {
        var round = ByteBuffer()
        var roundPayloads: [Int] = []
        var roundEnds: [Int] = []
        let payload = ByteBuffer(bytes: BenchmarkPayload.make(size: payloadSize, numbering: 0, stamp: 0))
        for topic in topics {
            round.writeRequest(Request(.publish(topic, payload: payload, PublishOptions(retain: retain, acknowledge: false))))
            roundEnds.append(round.writerIndex)
            // The frame ends with the payload and its line break.
            roundPayloads.append(round.writerIndex - 1 - payloadSize)
        }
        let rounds = max(1, targetBytes / round.readableBytes)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(rounds * round.readableBytes)
        var payloadOffsets: [Int] = []
        var frameEnds: [Int] = []
        for _ in 0..<rounds {
            let start = bytes.count
            bytes += round.readableBytesView
            payloadOffsets += roundPayloads.map { start + $0 }
            frameEnds += roundEnds.map { start + $0 }
        }
        self.bytes = bytes
        self.payloadOffsets = payloadOffsets
        self.frameEnds = frameEnds
        self.framesPerBatch = payloadOffsets.count
        self.topicCount = topics.count
    }

    /// Whether bytes of the current batch remain to be written.
    var hasPending: Bool { written < length }

    /// Makes the next batch: `count` messages (at most ``framesPerBatch``) of `publisher`, numbered from
    /// `firstSequence` (a multiple of ``framesPerBatch``), stamped `stamp`.
    mutating func prepare(publisher: Int, firstSequence: UInt64, count: Int, stamp: UInt64) {
        precondition(count > 0 && count <= framesPerBatch && firstSequence % UInt64(framesPerBatch) == 0)
        bytes.withUnsafeMutableBytes { buffer in
            let base = buffer.baseAddress!
            for slot in 0..<count {
                BenchmarkPayload.stampHeader(
                    base + payloadOffsets[slot],
                    numbering: BenchmarkPayload.numbering(publisher: publisher, sequence: firstSequence + UInt64(slot)),
                    stamp: stamp
                )
            }
        }
        length = frameEnds[count - 1]
        written = 0
    }

    /// Writes as much of the current batch as `send` takes now (``BenchConnection/write(_:)``, in a benchmark).
    /// - Returns: whether the batch is now written whole (false when the socket is full).
    mutating func write(with send: (UnsafeRawBufferPointer) throws -> BenchConnection.WriteOutcome) rethrows -> Bool {
        while written < length {
            let outcome = try bytes.withUnsafeBytes { buffer in
                try send(UnsafeRawBufferPointer(rebasing: buffer[written..<length]))
            }
            switch outcome {
            case .wrote(let count): written += count
            case .wouldBlock: return false
            }
        }
        return true
    }

    /// Sends message `sequence` of `publisher` alone, stamped `stamp`, waiting for the socket until `deadline`:
    /// the latency phase's one message at a time. Its topic is the one of its number, as in a batch.
    mutating func sendOne(publisher: Int, sequence: UInt64, stamp: UInt64, to connection: BenchConnection, deadline: UInt64) throws {
        let slot = Int(sequence % UInt64(topicCount))
        let start = slot == 0 ? 0 : frameEnds[slot - 1]
        try bytes.withUnsafeMutableBytes { buffer in
            BenchmarkPayload.stampHeader(
                buffer.baseAddress! + payloadOffsets[slot],
                numbering: BenchmarkPayload.numbering(publisher: publisher, sequence: sequence),
                stamp: stamp
            )
            try connection.writeAll(UnsafeRawBufferPointer(rebasing: buffer[start..<frameEnds[slot]]), deadline: deadline)
        }
    }
}
