import HTTPTypes
import HummingbirdCore
import NIOCore
import NIOHTTP1
import NotifyBus

/// Serves one stream (`GET /<topics>/json|sse|raw`, or `/ws` once upgraded; see ``FirstRequestRouter``) on its
/// connection's event loop: the same checks, events and ends as the routes' (``HTTPGateway/stream(_:topics:format:client:)``),
/// with no task held while it is open. Its queue wakes it when events come; it writes what waits while the socket
/// takes it, all in one flush (a WebSocket's frames too, each its own slice of one buffer), and waits for the socket
/// to drain when it does not (the queue then drops the oldest, told). The stream ends when the client goes (or sends
/// a WebSocket close), the subscription ends, or the gateway stops (its connections closed).
final class StreamResponder<Transport: StreamTransport>: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = Transport.InboundIn
    typealias OutboundOut = Transport.OutboundOut

    private enum Phase {
        case awaitingHead
        case opening
        case streaming(HTTPGateway.OpenStream)
        case ended
    }

    private let gateway: HTTPGateway
    private let format: StreamFormat
    /// What the bounds per client count its client as (``ClientRange``), asked of the kernel as it connected.
    private let client: String
    /// The request, when it was read before this was added (a WebSocket's upgrade, made or refused).
    private let upgradeHead: HTTPRequestHead?
    private var phase = Phase.awaitingHead
    private var context: ChannelHandlerContext?
    private var version = HTTPVersion.http1_1
    /// What the queue calls when events come after a take found none: made once, as every take may need it.
    private var wake: (@Sendable () -> Void)?
    /// The pings of a WebSocket's stream, and whether the last is unanswered.
    private var pings: RepeatedTask?
    private var awaitingPong = false

    init(gateway: HTTPGateway, format: StreamFormat, client: String, head: HTTPRequestHead? = nil) {
        self.gateway = gateway
        self.format = format
        self.client = client
        self.upgradeHead = head
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if let upgradeHead, context.channel.isActive {
            phase = .opening
            version = upgradeHead.version
            open(upgradeHead, context: context)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        if case .awaitingHead = phase, let head = Transport.head(of: part) {
            phase = .opening
            version = head.version
            if Transport.dropsDecoderAfterHead { dropDecoder(context) }
            open(head, context: context)
            return
        }
        // Only the first head counts: a stream's response never ends, so nothing after it is answered, but for what
        // a WebSocket's client may send (a ping, its close, a pong).
        if Transport.isPong(part) { awaitingPong = false }
        let (answer, ends) = Transport.reply(to: part)
        if let answer, ends || context.channel.isWritable {
            // A ping is answered while the socket takes what is written: a client that pings and never reads
            // piles up nothing.
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(answer)).whenComplete { _ in if ends { channel.close(promise: nil) } }
        } else if ends {
            context.close(promise: nil)
        }
    }

    /// Lets go of the request's decoder once the head is read (HTTP/1's keeps about 1.3 KB: its parser, the head's
    /// header list, its buffer): what the client sends later is read and dropped by a ``ClientBytesDiscarder``.
    private func dropDecoder(_ context: ChannelHandlerContext) {
        let pipeline = context.pipeline
        try? pipeline.syncOperations.addHandler(ClientBytesDiscarder(), position: .before(self))
        // Not from within the decoder's own read, which is where this runs.
        let bound = NIOLoopBound(pipeline, eventLoop: context.eventLoop)
        context.eventLoop.execute {
            guard let decoder = try? bound.value.syncOperations.context(handlerType: ByteToMessageHandler<HTTPRequestDecoder>.self) else { return }
            bound.value.syncOperations.removeHandler(context: decoder, promise: nil)
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { drain() }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        end()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        end()
        self.context = nil
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A head HTTP's parser refuses: answered as Hummingbird answers it; anything else ends the connection.
        if case .awaitingHead = phase, error is HTTPParserError {
            phase = .opening
            refuse(GatewayError(.badRequest, "the request could not be read as HTTP/1: \(error)"))
            return
        }
        context.close(promise: nil)
    }

    /// Checks the request as the routes' middlewares do, then opens its subscription (the only step that awaits:
    /// a task of its own until the daemon answered), then streams.
    private func open(_ head: HTTPRequestHead, context: ChannelHandlerContext) {
        let local = context.channel.localAddress
        let uri = URI(head.uri)
        var query = uri.queryParameters
        if let refusal = gateway.streamRefusal(head, uri: uri, local: local) {
            refuse(refusal)
            return
        }
        if format == .webSocket, !Transport.isWebSocket {
            refuse(GatewayError(.badRequest, "/ws takes a WebSocket upgrade (Connection: Upgrade, Upgrade: websocket); /json, /sse and /raw stream over HTTP"))
            return
        }
        // An EventSource that reconnects says where it was: resumed from there, as `since=` would.
        if query["since"] == nil, let last = head.headers.first(name: "Last-Event-ID"), MessageID(last[...]) != nil {
            query["since"] = last[...]
        }
        let topics = uri.path.dropFirst().prefix { $0 != "/" }
        let gateway = self.gateway, client = self.client
        let loop = context.eventLoop
        let this = NIOLoopBound(self, eventLoop: loop)
        Task { [topics = String(topics), query] in
            do {
                let stream = try await gateway.openStream(topics: topics[...], query: query, poll: false, client: client)
                loop.execute { this.value.start(stream) }
            } catch {
                let refusal = error as? GatewayError ?? GatewayError(error)
                loop.execute { this.value.refuse(refusal) }
            }
        }
    }

    /// Writes the head and `open`, then what comes.
    private func start(_ stream: HTTPGateway.OpenStream) {
        guard case .opening = phase, let context else {
            // The client went while the subscription opened.
            stream.lease.end()
            return
        }
        phase = .streaming(stream)
        gateway.metrics.responded(200)
        if let head = Transport.start(version: version, format: format) { context.write(wrapOutboundOut(head), promise: nil) }
        Transport.write([.open(topics: stream.names, at: .now())], format: format, allocator: context.channel.allocator) {
            context.write(wrapOutboundOut($0), promise: nil)
        }
        let loop = context.eventLoop
        let this = NIOLoopBound(self, eventLoop: loop)
        wake = { loop.execute { this.value.drain() } }
        if Transport.ping != nil {
            // At the keepalives' pace (--keepalive, 30 s), as hummingbird-websocket's routes pinged.
            let interval = TimeAmount(gateway.configuration.keepalive)
            pings = loop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { _ in this.value.pingOrClose() }
        }
        gateway.keepalives.add(stream.queue, names: stream.names)
        context.flush()
        drain()
    }

    /// Writes what waits while the socket takes it, each take up to ``HTTPGateway/writeBatch`` bytes of events, and
    /// flushes once.
    private func drain() {
        guard case .streaming(let stream) = phase, let context, let wake else { return }
        var wrote = false
        defer { if wrote { context.flush() } }
        while context.channel.isWritable {
            guard let events = stream.queue.take(upTo: HTTPGateway.writeBatch, orWake: wake) else {
                // The subscription ended, or the gateway stops: the response's end, then the connection's.
                phase = .ended
                end(stream)
                let channel = context.channel
                context.writeAndFlush(wrapOutboundOut(Transport.end)).whenComplete { _ in channel.close(promise: nil) }
                return
            }
            if events.isEmpty { return }
            for case .dropped(let notice, _) in events { gateway.metrics.streamDropped(notice.count) }
            let bytes = Transport.write(events, format: format, allocator: context.channel.allocator) {
                context.write(wrapOutboundOut($0), promise: nil)
            }
            gateway.metrics.streamed(bytes)
            wrote = true
        }
    }

    /// Pings the client, or closes the connection of one that did not answer the last ping.
    private func pingOrClose() {
        guard case .streaming = phase, let context, let ping = Transport.ping else { return }
        if awaitingPong {
            context.close(promise: nil)
            return
        }
        awaitingPong = true
        context.writeAndFlush(wrapOutboundOut(ping), promise: nil)
    }

    /// Answers with `refusal` (ntfy's error object; a WebSocket's close) and closes.
    private func refuse(_ refusal: GatewayError) {
        guard case .opening = phase, let context else { return }
        phase = .ended
        gateway.metrics.responded(Int(refusal.status.code))
        var parts = Transport.refusal(refusal, version: version)
        let last = parts.removeLast()
        for part in parts { context.write(wrapOutboundOut(part), promise: nil) }
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(last)).whenComplete { _ in channel.close(promise: nil) }
    }

    /// Lets go of what the stream holds, once.
    private func end() {
        let open = phase
        phase = .ended
        if case .streaming(let stream) = open { end(stream) }
    }

    private func end(_ stream: HTTPGateway.OpenStream) {
        wake = nil
        pings?.cancel()
        pings = nil
        gateway.keepalives.remove(stream.queue)
        stream.queue.finish()
        stream.lease.end()
    }
}

/// Reads and drops what a stream's client sends after its request: a stream answers one request only.
final class ClientBytesDiscarder: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = Never

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}
}

extension HTTPGateway {
    /// Why a stream's request is refused before its subscription opens: the checks every route is behind
    /// (``refusal(host:origin:authorization:auth:reading:local:)``), then its topics and `since`; nil when it may
    /// open. A WebSocket's upgrade asks this first, so that a refusal is an HTTP error, as the route's is.
    func streamRefusal(_ head: HTTPRequestHead, uri: URI, local: SocketAddress?) -> GatewayError? {
        let query = uri.queryParameters
        // One of each, as Hummingbird's routes take them (it joins repeated fields, which then match nothing).
        for name in ["Host", "Origin", "Authorization"] where head.headers[name].count > 1 {
            return GatewayError(.badRequest, "the request has more than one \(name) header")
        }
        if let refusal = refusal(
            host: head.headers.first(name: "Host"),
            origin: head.headers.first(name: "Origin"),
            authorization: head.headers.first(name: "Authorization"),
            auth: query["auth"],
            reading: true,
            local: local
        ) {
            return refusal
        }
        do {
            _ = try TopicList.patterns(uri.path.dropFirst().prefix { $0 != "/" })
            _ = try Since(parsing: query["since"] ?? "", now: .now())
        } catch {
            return error
        }
        return nil
    }
}
