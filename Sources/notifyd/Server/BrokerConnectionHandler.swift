import Logging
import NIOCore
import NotifyBus

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Connects one client's channel to the broker: opens a session with the peer's kernel credentials, decodes its
/// bytes into requests for the broker, and flushes once per batch of reads.
///
/// All connections and the broker live on one event loop, so calling the broker from here needs no lock. The
/// decoder runs here rather than in a `ByteToMessageHandler` of its own: passing each request down the pipeline
/// would box it in an existential and cast it back, which cost more than the rest of a publish.
final class BrokerConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let broker: Broker
    private let logger: Logger
    private var decoder: RequestDecoder
    /// The start of a frame whose end has not arrived yet; nil between frames, so an idle connection holds no
    /// receive buffer.
    private var unread: ByteBuffer?
    private var session: Session?
    private var transport: ChannelTransport?

    init(broker: Broker, decoder: RequestDecoder, logger: Logger) {
        self.broker = broker
        self.decoder = decoder
        self.logger = logger
    }

    func channelActive(context: ChannelHandlerContext) {
        var peer: PeerCredentials
        do {
            peer = try PeerCredentials.ofPeer(of: context.channel)
        } catch {
            logger.log(.connectionError, .warning, "closing a connection whose peer credentials cannot be read: \(error)")
            context.close(promise: nil)
            return
        }
        peer.unit = UnitLookup.unit(ofPeerOf: context.channel, pid: peer.pid, uid: peer.uid)
        let transport = ChannelTransport(context: context)
        self.transport = transport
        let session = broker.open(peer: peer, transport: transport)
        self.session = session
        logger.log(.connectionOpened, .debug, "connection opened", peer.logMetadata.merging(["session": "\(session.id)"]) { $1 })
        broker.flush()
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard let session else { return }
        var buffer = unwrapInboundIn(data)
        if var pending = unread.take() {
            pending.writeBuffer(&buffer)
            buffer = pending
        }
        while let request = decoder.decode(buffer: &buffer) {
            broker.handle(request, from: session)
        }
        guard buffer.readableBytes > 0 else { return }
        // A few bytes of a frame would keep a whole receive buffer alive: copy them out.
        if buffer.readableBytes * 4 < buffer.capacity {
            var copy = context.channel.allocator.buffer(capacity: max(buffer.readableBytes, 256))
            copy.writeBuffer(&buffer)
            unread = copy
        } else {
            unread = buffer
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        broker.flush()
    }

    /// While the connection does not take what it is sent, its requests are not read either (and those already
    /// read wait in the broker): a client that does not read its replies is held back, not buffered for.
    /// Deliveries from others go to the broker's bounded queue meanwhile, and out again once it takes them.
    func channelWritabilityChanged(context: ChannelHandlerContext) {
        let writable = context.channel.isWritable
        transport?.writabilityChanged(writable)
        if writable, let session {
            broker.writabilityChanged(session)
            broker.flush()
        }
        let reading = context.channel.isWritable && session?.isHoldingBack != true
        try? context.channel.syncOptions?.setOption(.autoRead, value: reading)
    }

    func channelInactive(context: ChannelHandlerContext) {
        if let session {
            if var rest = unread.take(), let request = decoder.decodeLast(buffer: &rest, seenEOF: true) {
                broker.handle(request, from: session)
            }
            broker.close(session)
            logger.log(.connectionClosed, .debug, "connection closed", ["session": "\(session.id)"])
        }
        broker.flush()
        session = nil
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A reset by a client that vanished is routine; anything else is worth a line.
        if let io = error as? IOError, io.errnoCode == ECONNRESET || io.errnoCode == EPIPE {
            logger.log(.connectionClosed, .debug, "connection reset by peer", session?.peer.logMetadata ?? [:])
        } else {
            logger.log(.connectionError, .warning, "connection error; closing it: \(error)", session?.peer.logMetadata ?? [:])
        }
        context.close(promise: nil)
    }
}
