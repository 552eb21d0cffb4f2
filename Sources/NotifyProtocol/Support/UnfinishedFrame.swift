package import NIOCore

extension ByteBuffer {
    /// What is left of a receive buffer once its whole frames are taken (the start of one, which the decoder has
    /// bounded), as a buffer to keep for the next read: copied out when it is a small part of the buffer, since a few
    /// bytes kept would keep the whole receive buffer alive, and every payload sliced from it.
    package mutating func keptForNextRead(allocator: ByteBufferAllocator) -> ByteBuffer {
        guard readableBytes < capacity / 2 else { return self }
        var copy = allocator.buffer(capacity: Swift.max(readableBytes, 256))
        copy.writeBuffer(&self)
        return copy
    }
}
