import NIOCore

/// Closes a connection whose first request has not sent its whole head within `deadline` of the connection's
/// opening: a client that opens connections and sends nothing, or a byte now and then, would otherwise hold them,
/// and its share of the bounds on connections, for ever. It reads the bytes before the HTTP decoder (which has not
/// been set up yet while the first head comes: the WebSocket upgrade waits for it) and leaves once the head's blank
/// line has passed; later requests on the connection are timed by the idle timeout of Hummingbird's HTTP channel.
final class RequestHeadDeadline: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let deadline: TimeAmount
    private var timer: Scheduled<Void>?
    /// The last four bytes read, to find the blank line that ends a head across reads.
    private var tail: UInt32 = 0
    /// Whether the request line has begun: line breaks before it are skipped by HTTP's parsers, so a blank line
    /// there ends nothing.
    private var started = false

    init(deadline: TimeAmount) {
        self.deadline = deadline
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { arm(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        arm(context)
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var ended = false
        for byte in unwrapInboundIn(data).readableBytesView {
            if !started {
                guard byte != UInt8(ascii: "\r"), byte != UInt8(ascii: "\n") else { continue }
                started = true
            }
            tail = tail << 8 | UInt32(byte)
            // CR LF CR LF, or LF LF, which HTTP/1's parsers take too.
            if tail == 0x0D0A_0D0A || tail & 0xFFFF == 0x0A0A {
                ended = true
                break
            }
        }
        context.fireChannelRead(data)
        if ended { context.pipeline.syncOperations.removeHandler(context: context, promise: nil) }
    }

    private func arm(_ context: ChannelHandlerContext) {
        guard timer == nil else { return }
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(in: deadline) { bound.value.close(promise: nil) }
    }
}
