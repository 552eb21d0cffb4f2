import Logging
import NIOCore
import NotifyProtocol
import NotifyBroker

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
    /// Where the connection is counted while active, so that shutdown waits for it.
    private let connections: OpenConnections?
    @exclusivity(unchecked) private var decoder: RequestDecoder
    /// The start of a frame whose end has not arrived yet; nil between frames, so an idle connection holds no
    /// receive buffer.
    @exclusivity(unchecked) private(set) var unread: ByteBuffer?
    @exclusivity(unchecked) private var session: Session?
    @exclusivity(unchecked) private var transport: ChannelTransport?
    /// Set while requests already read wait for this connection's next turn (see ``workPerTurn``).
    @exclusivity(unchecked) private var waitsForTurn = false
    /// Whether reading stopped because the broker held back requests of this connection.
    @exclusivity(unchecked) private var readingHeldBack = false
    /// Where the current turn ends, in broker work: one turn spans all the reads of one read loop (NIO may read a
    /// socket several times before its `channelReadComplete`); nil between turns.
    @exclusivity(unchecked) private var turnEnds: Int?
    /// Who the peer is: from the kernel, and the unit checked against it; tests give their own.
    private let identify: (any Channel) throws -> PeerCredentials
    /// How long an unfinished frame may wait for its next byte before the connection is closed.
    private let frameTimeout: TimeAmount
    /// Bytes read from the connection so far, to tell an unfinished frame that makes progress from one that stalled.
    @exclusivity(unchecked) private var bytesReceived = 0
    @exclusivity(unchecked) private var stalledFrameCheck: Scheduled<Void>?

    /// How much broker work (``Broker/workDone``) one connection gets before the others' reads, the timers and the
    /// watchdog get theirs: about a thousand plain requests, or a few walks of a large topic table.
    static let workPerTurn = 1_024

    init(
        broker: Broker,
        decoder: RequestDecoder,
        logger: Logger,
        connections: OpenConnections? = nil,
        frameTimeout: TimeAmount = .seconds(30),
        identify: @escaping (any Channel) throws -> PeerCredentials = BrokerConnectionHandler.identifyFromKernel
    ) {
        self.broker = broker
        self.decoder = decoder
        self.logger = logger
        self.connections = connections
        self.frameTimeout = frameTimeout
        self.identify = identify
    }

    /// The peer's credentials as the kernel gives them, and its unit.
    static func identifyFromKernel(_ channel: any Channel) throws -> PeerCredentials {
        var peer = try PeerCredentials.ofPeer(of: channel)
        peer.unit = UnitLookup.unit(ofPeerOf: channel, pid: peer.pid, uid: peer.uid)
        return peer
    }

    func channelActive(context: ChannelHandlerContext) {
        let peer: PeerCredentials
        do {
            peer = try identify(context.channel)
        } catch {
            logger.log(.connectionError, .warning, "closing a connection whose peer credentials cannot be read: \(error)")
            context.close(promise: nil)
            return
        }
        let transport = ChannelTransport(context: context)
        self.transport = transport
        connections?.add(transport)
        let session = broker.open(peer: peer, transport: transport)
        self.session = session
        // The greeting, written before the session was known here, may have filled a tiny write buffer.
        broker.writabilityChanged(session)
        transport.handler = self
        logger.log(.connectionOpened, .debug, "connection opened", peer.logMetadata.merging(["session": "\(session.id)"]) { $1 })
        broker.flush()
        context.fireChannelActive()
    }

    /// The peer took bytes that waited in the write buffer: they no longer count against its uid, and what the broker
    /// queued for it may go.
    func bufferTaken(context: ChannelHandlerContext) {
        guard let session else { return }
        broker.writeBufferChanged(session)
        broker.flush()
        // Requests held back while its replies counted against its uid's budget may have gone: read again.
        updateReading(context: context)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        bytesReceived &+= buffer.readableBytes
        if var pending = unread.take() {
            pending.writeBuffer(&buffer)
            buffer = pending
        }
        handleRequests(in: &buffer, context: context)
        // Requests it sent are held back while its unread replies count against its uid's budget: no more are read
        // until they go (``bufferTaken(context:)``), or they would pile up.
        if session?.isHoldingBack == true { updateReading(context: context) }
    }

    /// Carries out the complete requests in `buffer` for one turn's worth of work, and keeps the rest. When the turn
    /// ends first, reading stops and the rest waits for a turn of its own, after what else the event loop has to do.
    private func handleRequests(in buffer: inout ByteBuffer, context: ChannelHandlerContext) {
        guard let session else { return }
        guard !waitsForTurn else {
            // A read that came in the same loop as the end of the turn: it waits for the next turn too.
            keepUnread(&buffer, context: context)
            return
        }
        let turnEnds = self.turnEnds ?? broker.workDone &+ Self.workPerTurn
        self.turnEnds = turnEnds
        while broker.workDone < turnEnds, let frame = decoder.decodeInPlace(buffer: &buffer) {
            switch frame {
            case .publish(let publish): broker.handlePublish(publish, in: buffer, from: session)
            case .other(let request): broker.handle(request, from: session)
            }
        }
        if broker.workDone >= turnEnds && buffer.readableBytes > 0 {
            waitsForTurn = true
            updateReading(context: context)
            let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            context.eventLoop.execute {
                let (handler, context) = loopBound.value
                handler.takeTurn(context: context)
            }
        }
        keepUnread(&buffer, context: context)
    }

    /// The next turn of requests read earlier.
    private func takeTurn(context: ChannelHandlerContext) {
        waitsForTurn = false
        turnEnds = nil
        if var buffer = unread.take() { handleRequests(in: &buffer, context: context) }
        turnEnds = nil
        broker.flush()
        updateReading(context: context)
    }

    /// Keeps what is left of `buffer` for the next read, counted against the uid's budget of unfinished requests.
    private func keepUnread(_ buffer: inout ByteBuffer, context: ChannelHandlerContext) {
        if buffer.readableBytes > 0 {
            // A few bytes of a frame would keep a whole receive buffer alive: copy them out. A small buffer is
            // copied whatever it holds: NIO reads into the same buffer again only if no one else holds it, and would
            // otherwise keep another one besides it for as long as the connection lasts (a connection's first
            // buffers are small: NotifyServer.receiveAllocator).
            if buffer.readableBytes * 4 < buffer.capacity || buffer.capacity <= 4 << 10 {
                var copy = context.channel.allocator.buffer(capacity: max(buffer.readableBytes, 256))
                copy.writeBuffer(&buffer)
                unread = copy
            } else {
                unread = buffer
            }
        }
        guard let session else { return }
        guard broker.holdUnread(unread?.readableBytes ?? 0, for: session) else {
            unread = nil
            return
        }
        watchForStalledFrame(context: context)
    }

    /// Closes the connection if an unfinished frame gets no byte more for `frameTimeout` while the daemon reads:
    /// a client that stops mid-frame would otherwise hold its bytes, and its place, for good.
    private func watchForStalledFrame(context: ChannelHandlerContext) {
        guard unread != nil, !waitsForTurn, stalledFrameCheck == nil else { return }
        let mark = bytesReceived
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        stalledFrameCheck = context.eventLoop.scheduleTask(in: frameTimeout) {
            let (handler, context) = loopBound.value
            handler.checkStalledFrame(since: mark, context: context)
        }
    }

    private func checkStalledFrame(since mark: Int, context: ChannelHandlerContext) {
        stalledFrameCheck = nil
        guard let session, unread != nil, !waitsForTurn else { return }
        // Not reading it (it does not take its replies) is the daemon's doing, not a stall of the client's.
        let reading = context.channel.isWritable && !session.isHoldingBack
        if bytesReceived != mark || !reading {
            watchForStalledFrame(context: context)
            return
        }
        let seconds = frameTimeout.nanoseconds / 1_000_000_000
        broker.end(session, with: ProtocolError(
            .malformed,
            "a request stopped mid-way and nothing more came for \(seconds) s; the connection is closed"
        ))
        unread = nil
        _ = broker.holdUnread(0, for: session)
        broker.flush()
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        turnEnds = nil
        broker.flush()
    }

    /// While the connection does not take what it is sent, its requests are not read either (and those already
    /// read wait in the broker): a client that does not read its replies is held back, not buffered for.
    /// Deliveries from others go to the broker's bounded queue meanwhile, and out again once it takes them.
    func channelWritabilityChanged(context: ChannelHandlerContext) {
        let writable = context.channel.isWritable
        transport?.writabilityChanged(writable)
        if let session {
            // Either way: the broker keeps what it was last told (NIO says it turned false from within a write).
            broker.writabilityChanged(session)
            if writable { broker.flush() }
        }
        updateReading(context: context)
    }

    /// Reads while the connection takes what it is sent, and its requests are not waiting for their turn.
    private func updateReading(context: ChannelHandlerContext) {
        let reading = context.channel.isWritable && session?.isHoldingBack != true && !waitsForTurn
        readingHeldBack = !reading && session?.isHoldingBack == true
        try? context.channel.syncOptions?.setOption(.autoRead, value: reading)
    }

    /// Reads again if reading stopped for requests the broker held back and it has carried them out since: after a
    /// sync of the state log that they waited for, say (the transport asks at each flush).
    func resumeReadingIfReleased(context: ChannelHandlerContext) {
        guard readingHeldBack, session?.isHoldingBack != true else { return }
        updateReading(context: context)
    }

    func channelInactive(context: ChannelHandlerContext) {
        stalledFrameCheck?.cancel()
        stalledFrameCheck = nil
        if let session {
            // What it sent and was still waiting for its turn: its publishes and clears are carried out, as the
            // broker does with what it held back (a client that wrote and left still published); questions whose
            // answers nobody will read are not.
            if var rest = unread.take() {
                while let request = decoder.decodeLast(buffer: &rest, seenEOF: true) {
                    guard case .request(let inner) = request else { continue }
                    switch inner.command {
                    case .publish, .clear: broker.handle(request, from: session)
                    default: continue
                    }
                }
            }
            broker.close(session)
            logger.log(.connectionClosed, .debug, "connection closed", ["session": "\(session.id)"])
        }
        broker.flush()
        session = nil
        // Nothing is told about a connection that is gone.
        transport?.handler = nil
        // The transport holds the context, which holds this handler: let go, or the three (and the channel with
        // them) are never freed.
        if let transport { connections?.remove(transport) }
        transport = nil
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
