import Logging
import NIOCore
import NotifyBus

/// A session's frames, written to its NIO channel.
///
/// Writability is NIO's: the channel stops taking frames once its write buffer is over the high-water mark (set on
/// the listener), and the broker queues them itself until ``writabilityChanged(_:)`` says it takes them again.
final class ChannelTransport: SessionTransport {
    /// How long a closing connection may take to accept what it is owed.
    static let closeGrace = TimeAmount.seconds(5)

    private let context: ChannelHandlerContext
    private var isClosing = false
    private(set) var isWritable = true

    init(context: ChannelHandlerContext) {
        self.context = context
    }

    func write(_ frame: ByteBuffer) {
        guard !isClosing else { return }
        context.write(NIOAny(frame), promise: nil)
    }

    func flush() {
        guard !isClosing else { return }
        context.flush()
    }

    /// How long a connection whose output is closed may still send before it is closed altogether.
    static let linger = TimeAmount.seconds(1)

    /// Closes once everything queued has been written (so a final `ERR` arrives), or after `closeGrace` if the
    /// peer does not read it.
    ///
    /// The output is closed first, and what the peer still sends is read and discarded for a while: closing a
    /// socket with unread input resets the connection, and the peer could then lose the `ERR` that says why.
    func close() {
        guard !isClosing else { return }
        isClosing = true
        let context = self.context
        let loop = context.eventLoop.assumeIsolated()
        let written = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(NIOAny(ByteBuffer()), promise: written)
        let deadline = loop.scheduleTask(in: ChannelTransport.closeGrace) {
            context.close(promise: nil)
        }
        written.futureResult.assumeIsolated().whenComplete { _ in
            deadline.cancel()
            let outputClosed = context.eventLoop.makePromise(of: Void.self)
            context.close(mode: .output, promise: outputClosed)
            outputClosed.futureResult.assumeIsolated().whenFailure { _ in context.close(promise: nil) }
            loop.scheduleTask(in: ChannelTransport.linger) { context.close(promise: nil) }
        }
    }

    func abort() {
        isClosing = true
        context.close(promise: nil)
    }

    func writabilityChanged(_ writable: Bool) {
        isWritable = writable
    }
}
