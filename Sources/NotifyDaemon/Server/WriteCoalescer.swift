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
/// (its buffer may grow to two), and counted in the connection's buffered bytes.
struct WriteCoalescer {
    /// How much is gathered before it goes to NIO, and the smallest write that goes as it is, after what waits: NIO's
    /// cost per write is 2–3% of it. Small, because every connection that is behind holds one: 1,000 subscribers
    /// behind at once held 64 KiB each (and up to twice that in the buffers' room) with chunks of 64 KiB, a daemon
    /// peak of 183 MiB where it had been 65 (`Benchmarks/IdleAfterBurst/run.sh`, `COUNT=20000`).
    static let chunkSize = 8 << 10

    private var gathered: ByteBuffer?

    /// Bytes waiting here.
    var gatheredBytes: Int { gathered?.readableBytes ?? 0 }

    /// Writes `frame`: passed to `emit` as it is while nothing waits and NIO holds nothing (`peerIsBehind` false),
    /// else gathered, and what was gathered is emitted once it makes a chunk. A frame of a chunk or more is emitted
    /// as it is, after what was gathered before it.
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
        if frame.readableBytes >= WriteCoalescer.chunkSize {
            if let earlier = take() { emit(earlier) }
            emit(frame)
            return
        }
        if gathered == nil { gathered = allocator.buffer(capacity: WriteCoalescer.chunkSize) }
        gathered!.writeImmutableBuffer(frame)
        if gathered!.readableBytes >= WriteCoalescer.chunkSize, let chunk = take() { emit(chunk) }
    }

    /// What was gathered, to hand to NIO now (once it has written everything before, or on close).
    mutating func take() -> ByteBuffer? {
        defer { gathered = nil }
        return gathered
    }
}
