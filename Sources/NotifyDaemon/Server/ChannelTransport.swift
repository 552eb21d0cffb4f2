import Logging
import NIOCore
import NotifyProtocol
import NotifyBroker

/// A session's frames, written to its NIO channel.
///
/// Writability is NIO's: the channel stops taking frames once its write buffer is over the high-water mark (set on
/// the listener), and the broker queues them itself until ``writabilityChanged(_:)`` says it takes them again.
///
/// What waits in the write buffer counts against the uid's budget of queued bytes (``bufferedBytes``). Asking NIO
/// costs a few dynamic casts, so it is asked only after a flush that left bytes there, or after
/// ``measureEvery`` bytes were written since it last said none were left: a connection that keeps up is asked once
/// per that many bytes, and holds less than that unaccounted. While bytes wait, an empty write after them tells
/// when the peer has taken them, and the handler (``BrokerConnectionHandler/bufferTaken(context:)``) lets the broker count them off. Meanwhile what is written
/// waits in a ``WriteCoalescer`` rather than as a pending write of NIO's each (see there why).
final class ChannelTransport: SessionTransport {
    /// How long a closing connection may take to accept what it is owed.
    static let closeGrace = TimeAmount.seconds(5)

    private let context: ChannelHandlerContext
    @exclusivity(unchecked) private var isClosing = false
    @exclusivity(unchecked) private(set) var isWritable = true
    /// The write buffer's bytes when NIO was last asked.
    @exclusivity(unchecked) private var nioBufferedBytes = 0
    /// What was written while NIO held bytes, waiting for it to write them.
    @exclusivity(unchecked) private var coalescer = WriteCoalescer()
    /// What waits to be written: in NIO's write buffer when it was last asked, and gathered since.
    var bufferedBytes: Int { nioBufferedBytes + coalescer.gatheredBytes }
    /// Bytes written since NIO was last asked.
    @exclusivity(unchecked) private var unmeasuredBytes = 0
    /// Whether an empty write waits behind the buffered bytes, to tell when they are taken.
    @exclusivity(unchecked) private var watchesBuffer = false
    /// Told when bytes left the write buffer without a flush of the broker's. Not retained, and not a closure (which
    /// would cost every connection an allocation of its own): this transport holds the context, which holds the
    /// handler, so the handler is there for as long as the transport is; `channelInactive` clears it all the same.
    @exclusivity(unchecked) unowned(unsafe) var handler: BrokerConnectionHandler?

    /// How many bytes may be written, while NIO last said it held none, before it is asked again.
    static let measureEvery = 16 << 10

    init(context: ChannelHandlerContext) {
        self.context = context
    }

    /// When the connection will be closed.
    var closeFuture: EventLoopFuture<Void> { context.channel.closeFuture }

    func write(_ frame: ByteBuffer) {
        guard !isClosing else { return }
        unmeasuredBytes &+= frame.readableBytes
        let context = self.context
        coalescer.write(frame, peerIsBehind: nioBufferedBytes > 0, allocator: context.channel.allocator) {
            context.write(NIOAny($0), promise: nil)
        }
    }

    func flush() {
        guard !isClosing else { return }
        context.flush()
        handler?.resumeReadingIfReleased(context: context)
        guard nioBufferedBytes > 0 || unmeasuredBytes >= ChannelTransport.measureEvery else { return }
        measure()
        if nioBufferedBytes > 0 && !watchesBuffer { watchBuffer() }
    }

    /// Asks NIO what its write buffer holds; once it holds nothing, what was gathered meanwhile goes to it.
    private func measure() {
        unmeasuredBytes = 0
        nioBufferedBytes = isClosing ? 0 : (try? context.channel.syncOptions?.getOption(.bufferedWritableBytes)) ?? 0
        if nioBufferedBytes == 0, !isClosing, let gathered = coalescer.take() {
            nioBufferedBytes = gathered.readableBytes
            context.writeAndFlush(NIOAny(gathered), promise: nil)
        }
    }

    /// Writes an empty buffer behind what waits: its promise completes once the peer has taken all before it.
    private func watchBuffer() {
        watchesBuffer = true
        let taken = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(NIOAny(ByteBuffer()), promise: taken)
        taken.futureResult.assumeIsolated().whenComplete { [self] _ in
            watchesBuffer = false
            // What was gathered goes to NIO here, and the broker may flush (and arm a watch) before this goes on.
            measure()
            if nioBufferedBytes > 0 && !isClosing && !watchesBuffer { watchBuffer() }
            handler?.bufferTaken(context: context)
        }
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
        if let gathered = coalescer.take() { context.write(NIOAny(gathered), promise: nil) }
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
