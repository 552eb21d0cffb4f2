import NIOCore
import NotifyProtocol

/// The deliveries of one batch of reads, encoded back to back in one buffer, and the small frames written for one
/// connection in between (replies, replayed messages; see ``Broker/send(_:to:_:)``).
///
/// A subscriber that receives a run of them is handed one slice of the buffer at the end of the batch (one write,
/// one `iovec`) instead of one buffer per message, and every subscriber shares the same bytes: a publish is
/// encoded once however many subscribers it has, and a thousand publishes in a batch cost a handful of
/// allocations, not a thousand.
///
/// A slice keeps the whole buffer alive until the connection has written it, so a run much smaller than the buffer
/// is copied out instead (``frame(_:allocator:)``): what the daemon holds for a connection stays within a small
/// factor of what it owes it. Frames kept beyond the batch (buffered messages, the queue of a slow subscriber)
/// are always copies, for the same reason.
struct DeliveryBatch {
    /// The size of a batch's buffer; a batch that needs more starts a new one.
    static let capacity = 64 << 10

    /// The frames of this batch, from index 0.
    private(set) var buffer: ByteBuffer
    /// Changes whenever the buffer starts over, so a span of an earlier batch is never mistaken for one of this.
    private(set) var generation: UInt64 = 0

    init(allocator: ByteBufferAllocator) {
        buffer = allocator.buffer(capacity: DeliveryBatch.capacity)
    }

    /// Whether a frame of at most `size` bytes fits without the buffer growing (which would copy it, as slices of
    /// it may already be out).
    func hasRoom(for size: Int) -> Bool {
        buffer.writableBytes >= size
    }

    /// Appends a frame written by `encode`, and returns where it is.
    mutating func append(_ encode: (inout ByteBuffer) -> Void) -> Range<Int> {
        let start = buffer.writerIndex
        encode(&buffer)
        return start..<buffer.writerIndex
    }

    /// The frames in `range`, to write to a connection: a slice of the buffer when the range is a good part of it,
    /// else a copy.
    func frame(_ range: Range<Int>, allocator: ByteBufferAllocator) -> ByteBuffer {
        precondition(range.upperBound <= buffer.writerIndex, "frames of an earlier batch")
        if range.count * 2 >= buffer.capacity {
            return buffer.getSlice(at: range.lowerBound, length: range.count)!
        }
        return copy(range, allocator: allocator)
    }

    /// The bytes in `range` as a slice of the buffer, lent for the length of a call: kept longer, it would make the
    /// batch copy its buffer at its next append.
    func lend(_ range: Range<Int>) -> ByteBuffer {
        precondition(range.upperBound <= buffer.writerIndex, "frames of an earlier batch")
        return buffer.getSlice(at: range.lowerBound, length: range.count)!
    }

    /// Calls `body` with the bytes of the frames in `range`, which it must not keep.
    func withBytes<Result>(_ range: Range<Int>, _ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        precondition(range.upperBound <= buffer.writerIndex, "frames of an earlier batch")
        return try buffer.withUnsafeReadableBytes { try body(UnsafeRawBufferPointer(rebasing: $0[range])) }
    }

    /// A copy of the frames in `range`, that does not keep the batch's buffer alive.
    func copy(_ range: Range<Int>, allocator: ByteBufferAllocator) -> ByteBuffer {
        precondition(range.upperBound <= buffer.writerIndex, "frames of an earlier batch")
        var copy = allocator.buffer(capacity: range.count)
        withBytes(range) { _ = copy.writeBytes($0) }
        return copy
    }

    /// Starts over with room for at least `minimumCapacity` bytes. Call it only once no open span refers to the
    /// buffer. Memory of the old one is reused when no slice of it is still out.
    mutating func restart(minimumCapacity: Int = 0, allocator: ByteBufferAllocator) {
        generation &+= 1
        if buffer.capacity > 4 * DeliveryBatch.capacity && minimumCapacity <= DeliveryBatch.capacity {
            buffer = allocator.buffer(capacity: DeliveryBatch.capacity)
        } else {
            buffer.clear(minimumCapacity: max(DeliveryBatch.capacity, minimumCapacity))
        }
    }

    /// Whether anything was appended since the last restart.
    var isEmpty: Bool { buffer.writerIndex == 0 }
}
