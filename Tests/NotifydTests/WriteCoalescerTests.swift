import NIOCore
import Testing

@testable import NotifyDaemon

/// What reaches NIO for a connection: each frame while its peer keeps up, chunks while it is behind.
@Suite("Writes gathered while the peer is behind", .timeLimit(.minutes(3)))
struct WriteCoalescerTests {
    static func frames(_ count: Int, size: Int = 66) -> [ByteBuffer] {
        (0..<count).map { index in
            var frame = ByteBuffer(repeating: UInt8(ascii: "a") + UInt8(index % 26), count: size - 1)
            frame.writeInteger(UInt8(ascii: "\n"))
            return frame
        }
    }

    static func joined(_ buffers: [ByteBuffer]) -> ByteBuffer {
        var all = ByteBuffer()
        for buffer in buffers { all.writeImmutableBuffer(buffer) }
        return all
    }

    @Test("a peer that keeps up: every frame goes to NIO as it is, nothing waits")
    func keepingUp() {
        var coalescer = WriteCoalescer()
        var emitted: [ByteBuffer] = []
        for frame in Self.frames(100) {
            coalescer.write(frame, peerIsBehind: false, allocator: ByteBufferAllocator()) { emitted.append($0) }
        }
        #expect(emitted == Self.frames(100))
        #expect(coalescer.gatheredBytes == 0)
    }

    @Test("a peer behind: 10,001 small frames reach NIO as a few chunks, in order, and the rest when taken")
    func behind() {
        var coalescer = WriteCoalescer()
        var emitted: [ByteBuffer] = []
        let frames = Self.frames(10_001)
        for frame in frames {
            coalescer.write(frame, peerIsBehind: true, allocator: ByteBufferAllocator()) { emitted.append($0) }
        }
        // A chunk is emitted with the frame that fills it: whole frames of 66 bytes, a chunk or a little more.
        let perChunk = (WriteCoalescer.chunkSize + 65) / 66 * 66
        #expect(emitted.count == 10_001 * 66 / perChunk, "one write per full chunk")
        #expect(emitted.allSatisfy { $0.readableBytes == perChunk })
        #expect(coalescer.gatheredBytes == 10_001 * 66 - emitted.count * perChunk)
        // NIO has written everything before: what was gathered goes, and later frames pass straight through.
        let rest = coalescer.take()
        #expect(rest != nil)
        if let rest { emitted.append(rest) }
        let after = Self.frames(3, size: 10)
        for frame in after {
            coalescer.write(frame, peerIsBehind: false, allocator: ByteBufferAllocator()) { emitted.append($0) }
        }
        #expect(Self.joined(emitted) == Self.joined(frames + after))
        #expect(emitted.suffix(3) == after[...])
    }

    @Test("what was gathered stays ahead of later frames, even once NIO holds nothing; a large write follows it alone")
    func orderKept() {
        var coalescer = WriteCoalescer()
        var emitted: [ByteBuffer] = []
        let small = Self.frames(2)
        coalescer.write(small[0], peerIsBehind: true, allocator: ByteBufferAllocator()) { emitted.append($0) }
        coalescer.write(small[1], peerIsBehind: false, allocator: ByteBufferAllocator()) { emitted.append($0) }
        #expect(emitted.isEmpty, "the second waits behind the first, not ahead of it")
        let large = Self.frames(1, size: WriteCoalescer.chunkSize)[0]
        coalescer.write(large, peerIsBehind: true, allocator: ByteBufferAllocator()) { emitted.append($0) }
        #expect(emitted == [Self.joined(small), large])
        #expect(coalescer.take() == nil)
    }
}
