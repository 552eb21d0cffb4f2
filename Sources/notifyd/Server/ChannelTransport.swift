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

    /// Closes once everything queued has been written (so a final `ERR` arrives), or after `closeGrace` if the
    /// peer does not read it.
    func close() {
        guard !isClosing else { return }
        isClosing = true
        let context = self.context
        let written = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(NIOAny(ByteBuffer()), promise: written)
        let deadline = context.eventLoop.assumeIsolated().scheduleTask(in: ChannelTransport.closeGrace) {
            context.close(promise: nil)
        }
        written.futureResult.assumeIsolated().whenComplete { _ in
            deadline.cancel()
            context.close(promise: nil)
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
