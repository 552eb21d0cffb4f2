import NIOCore

/// Gathers what is written to a connection whose peer is behind into one buffer, handed to NIO a chunk at a time.
///
/// NIO keeps each pending write in a ring of about 50 bytes an entry, which never shrinks, beside the frame's own
/// buffer (a small frame is a copy of its own, another hundred bytes or so), and its write buffer's high-water mark
/// counts the frames' bytes only. A subscriber that stopped reading while messages came one per batch made the
/// daemon's RSS 151 MiB for 37.7 MiB it counted as queued (700,000 messages of 16 bytes;
/// `Benchmarks/IdleAfterBurst/caught-up.sh` with `ONE_AT_A_TIME=1`). While NIO holds bytes the peer has not
/// taken, the peer takes nothing more anyway: frames wait here meanwhile, back to back, and reach NIO when a chunk
/// is full or once NIO has written everything before them. What waits here is less than a chunk, outside NIO's mark
/// (its buffer, grown by doubling, may take twice that), and counted in the connection's buffered bytes.
struct WriteCoalescer {
    /// How much is gathered before it goes to NIO.
    static let chunkSize = 64 << 10
    /// The smallest write that goes to NIO as it is, whatever waits: a run of deliveries this long is a slice of the
    /// broker's batch, not a copy (`DeliveryBatch.frame`), and NIO's cost per write is nothing beside it. Copying
    /// such runs too (a limit of 64 KiB) took `notify bench --size 1024` from 1.14–1.31M to 0.93–1.05M msg/s, 1 → 1
    /// (5 alternated pairs); 2 and 16 KiB did as well as this.
    static let directWriteSize = 32 << 10

    private var gathered: ByteBuffer?

    /// Bytes waiting here.
    var gatheredBytes: Int { gathered?.readableBytes ?? 0 }

    /// Writes `frame`: passed to `emit` as it is while nothing waits and NIO holds nothing (`peerIsBehind` false),
    /// else gathered, and what was gathered is emitted once it makes a chunk. A frame of ``directWriteSize`` or more
    /// is emitted as it is, after what was gathered before it.
    mutating func write(
        _ frame: ByteBuffer,
        peerIsBehind: Bool,
        allocator: ByteBufferAllocator,
        emit: (ByteBuffer) -> Void
    ) {
        if gathered == nil && !peerIsBehind {
            emit(frame)
            return
        }
        if frame.readableBytes >= WriteCoalescer.directWriteSize {
            if let earlier = take() { emit(earlier) }
            emit(frame)
            return
        }
        if gathered == nil { gathered = allocator.buffer(capacity: 4 << 10) }
        gathered!.writeImmutableBuffer(frame)
        if gathered!.readableBytes >= WriteCoalescer.chunkSize, let chunk = take() { emit(chunk) }
    }

    /// What was gathered, to hand to NIO now (once it has written everything before, or on close).
    mutating func take() -> ByteBuffer? {
        defer { gathered = nil }
        return gathered
    }
}
