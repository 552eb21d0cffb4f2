import NIOCore
import NotifyProtocol

/// A topic's buffered message: the `MSG` frame that delivered it, in one block of memory with what the broker counts
/// of it.
///
/// One block, not a `ByteBuffer` in the topic's state: a buffer is an object of its own besides its bytes (80 bytes
/// of the heap with its allocator's hooks), and the struct that held it took 48 bytes of every topic's state,
/// buffered message or not; with 100,000 topics that was an eighth of the daemon's memory for them. The price is
/// that a reply copies the frame out (a `LATEST` once; `SUB … latest` always did), which ``BufferedMessage/replyWork``
/// charges to the asking connection's turn. A topic with history keeps no block while its history holds the same
/// message (``TopicState/retainedInHistory``).
///
/// A topic's state is its only owner; others borrow it for the length of a call, so replacing the frame in place
/// (``replace(with:payloadSize:sequence:)``) cannot be seen by anyone holding the old one.
final class RetainedMessage: ManagedBuffer<RetainedMessage.Header, UInt8> {
    struct Header {
        var sequence: UInt64
        /// Who published it, whose limit per user it counts against.
        var owner: UserAccount
        /// `MSG <topic> <seq> <time> <uid> <pid> <unit> <size>\n<payload>\n`: its length; the bytes follow. 32 bits,
        /// as a `ByteBuffer`'s (where every frame comes from), so the header takes 24 bytes.
        var frameLength: UInt32
        var payloadSize: UInt32
    }

    /// A block holding a copy of `frame`.
    static func make(frame: UnsafeRawBufferPointer, payloadSize: Int, sequence: UInt64, owner: UserAccount) -> RetainedMessage {
        let block = create(minimumCapacity: frame.count) { _ in
            Header(sequence: sequence, owner: owner, frameLength: 0, payloadSize: UInt32(payloadSize))
        }
        let message = unsafeDowncast(block, to: RetainedMessage.self)
        message.store(frame)
        return message
    }

    /// A block holding a copy of `frame`'s readable bytes.
    static func make(frame: ByteBuffer, payloadSize: Int, sequence: UInt64, owner: UserAccount) -> RetainedMessage {
        frame.withUnsafeReadableBytes { make(frame: $0, payloadSize: payloadSize, sequence: sequence, owner: owner) }
    }

    // Through the header's address, not `header`: the standard library is built for library evolution, so the
    // property is reached through accessors that copy the whole header (retaining its owner) on every read.
    var frameLength: Int { withUnsafeMutablePointerToHeader { Int($0.pointee.frameLength) } }
    var payloadSize: Int { withUnsafeMutablePointerToHeader { Int($0.pointee.payloadSize) } }
    var sequence: UInt64 { withUnsafeMutablePointerToHeader { $0.pointee.sequence } }
    var owner: UserAccount {
        get { withUnsafeMutablePointerToHeader { $0.pointee.owner } }
        set { withUnsafeMutablePointerToHeader { $0.pointee.owner = newValue } }
    }

    /// Whether `account` published it: asked without taking a reference to the owner.
    func isOwned(by account: UserAccount) -> Bool {
        withUnsafeMutablePointerToHeader { $0.pointee.owner === account }
    }

    /// Whether a frame of `length` bytes fits this block without leaving most of it unused: a topic republished with
    /// messages of about the same size keeps its block.
    func fits(_ length: Int) -> Bool {
        let capacity = self.capacity  // malloc's size of the block: asked once
        return length <= capacity && capacity <= 2 * length + 256
    }

    /// Holds `frame` instead of the frame it held, in place; it must ``fits(_:)``.
    func replace(with frame: UnsafeRawBufferPointer, payloadSize: Int, sequence: UInt64) {
        withUnsafeMutablePointerToHeader {
            $0.pointee.payloadSize = UInt32(payloadSize)
            $0.pointee.sequence = sequence
        }
        store(frame)
    }

    private func store(_ frame: UnsafeRawBufferPointer) {
        withUnsafeMutablePointers { header, bytes in
            if let source = frame.baseAddress { UnsafeMutableRawPointer(bytes).copyMemory(from: source, byteCount: frame.count) }
            header.pointee.frameLength = UInt32(frame.count)
        }
    }

    /// Calls `body` with the frame's bytes, valid during the call only.
    func withFrame<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try withUnsafeMutablePointers { header, bytes in
            try body(UnsafeRawBufferPointer(start: bytes, count: Int(header.pointee.frameLength)))
        }
    }

}
