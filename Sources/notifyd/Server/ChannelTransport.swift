import Logging
import NIOCore
import NotifyBus

/// A session's frames, written to its NIO channel.
///
/// A subscriber that stops reading makes its channel unwritable; frames queued past `maxBytesWhileBlocked` after
/// that point would only grow the daemon's memory, so the connection is closed instead.
final class ChannelTransport: SessionTransport {
    /// How much may be queued for a connection that does not read before it is dropped.
    static let maxBytesWhileBlocked = 64 << 20

    private let context: ChannelHandlerContext
    private let peer: PeerCredentials
    private let logger: Logger
    private var bytesWhileBlocked = 0
    private var framesWhileBlocked = 0
    private var isWritable = true
    private var isClosing = false

    init(context: ChannelHandlerContext, peer: PeerCredentials, logger: Logger) {
        self.context = context
        self.peer = peer
        self.logger = logger
    }

    func write(_ frame: ByteBuffer) {
        guard !isClosing else { return }
        if !isWritable {
            bytesWhileBlocked += frame.readableBytes
            framesWhileBlocked += 1
            if bytesWhileBlocked > ChannelTransport.maxBytesWhileBlocked {
                // The frames queued since it stopped reading are lost with the connection.
                var metadata = peer.logMetadata
                metadata["dropped"] = "\(framesWhileBlocked)"
                metadata["queued_bytes"] = "\(bytesWhileBlocked)"
                logger.log(.subscriberDisconnected, .warning, "closing a connection that stopped reading", metadata)
                isClosing = true
                context.close(promise: nil)
                return
            }
        }
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

    /// How long a closing connection may take to accept what it is owed.
    static let closeGrace = TimeAmount.seconds(5)

    func writabilityChanged(_ writable: Bool) {
        isWritable = writable
        if writable {
            bytesWhileBlocked = 0
            framesWhileBlocked = 0
        }
    }
}
