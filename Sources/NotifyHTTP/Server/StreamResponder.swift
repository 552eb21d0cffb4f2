import HTTPTypes
import HummingbirdCore
import NIOCore
import NIOHTTP1
import NotifyBus

/// Serves one stream (`GET /<topics>/json|sse|raw`, see ``FirstRequestRouter``) on its connection's event loop: the
/// same checks, events and ends as the route's (``HTTPGateway/stream(_:topics:format:client:)``), with no task held
/// while it is open. Its queue wakes it when events come; it writes what waits while the socket takes it, gathered
/// in one write and one flush, and waits for the socket to drain when it does not (the queue then drops the oldest,
/// told). The stream ends when the client goes, the subscription ends, or the gateway stops (its connections
/// closed).
final class StreamResponder: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private enum Phase {
        case awaitingHead
        case opening
        case streaming(HTTPGateway.OpenStream)
        case ended
    }

    private let gateway: HTTPGateway
    private let format: StreamFormat
    private var phase = Phase.awaitingHead
    private var context: ChannelHandlerContext?
    private var version = HTTPVersion.http1_1
    /// What the queue calls when events come after a take found none: made once, as every take may need it.
    private var wake: (@Sendable () -> Void)?

    init(gateway: HTTPGateway, format: StreamFormat) {
        self.gateway = gateway
        self.format = format
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // Only the first head counts: a stream's response never ends, so nothing after it is answered.
        guard case .head(let head) = unwrapInboundIn(data), case .awaitingHead = phase else { return }
        phase = .opening
        version = head.version
        dropDecoder(context)
        open(head, context: context)
    }

    /// Lets go of the HTTP/1 decoder once the head is read (it keeps about 1.3 KB: its parser, the head's header
    /// list, its buffer): what the client sends later is read and dropped by a ``ClientBytesDiscarder`` in its place.
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
        let uri = URI(head.uri)
        var query = uri.queryParameters
        let local = context.channel.localAddress
        if let refusal = gateway.refusal(
            host: head.headers.first(name: "Host"),
            origin: head.headers.first(name: "Origin"),
            authorization: head.headers.first(name: "Authorization"),
            auth: query["auth"],
            reading: true,
            local: local
        ) {
            refuse(refusal)
            return
        }
        // An EventSource that reconnects says where it was: resumed from there, as `since=` would.
        if query["since"] == nil, let last = head.headers.first(name: "Last-Event-ID"), MessageID(last[...]) != nil {
            query["since"] = last[...]
        }
        let topics = uri.path.dropFirst().prefix { $0 != "/" }
        let client = ClientRange.key(of: context.channel.remoteAddress, local: local)
        let gateway = self.gateway
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
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: format.contentType)
        headers.add(name: "Cache-Control", value: "no-cache")
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: version, status: .ok, headers: headers))), promise: nil)
        var opening = ByteBuffer()
        format.write(.open(topics: stream.names, at: .now()), into: &opening)
        if opening.readableBytes > 0 { context.write(wrapOutboundOut(.body(.byteBuffer(opening))), promise: nil) }
        let loop = context.eventLoop
        let this = NIOLoopBound(self, eventLoop: loop)
        wake = { loop.execute { this.value.drain() } }
        gateway.keepalives.add(stream.queue, names: stream.names)
        context.flush()
        drain()
    }

    /// Writes what waits while the socket takes it, each write gathering up to ``HTTPGateway/writeBatch`` bytes of
    /// events, and flushes once.
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
                context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
                return
            }
            if events.isEmpty { return }
            var batch = context.channel.allocator.buffer(capacity: 0)
            for event in events {
                if case .dropped(let notice, _) = event { gateway.metrics.streamDropped(notice.count) }
                format.write(event, into: &batch)
            }
            gateway.metrics.streamed(batch.readableBytes)
            context.write(wrapOutboundOut(.body(.byteBuffer(batch))), promise: nil)
            wrote = true
        }
    }

    /// Answers with `refusal` (ntfy's error object) and closes.
    private func refuse(_ refusal: GatewayError) {
        guard case .opening = phase, let context else { return }
        phase = .ended
        gateway.metrics.responded(Int(refusal.status.code))
        var body = ByteBuffer()
        refusal.writeBody(into: &body)
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        headers.add(name: "Content-Length", value: String(body.readableBytes))
        headers.add(name: "Connection", value: "close")
        let status = HTTPResponseStatus(statusCode: Int(refusal.status.code), reasonPhrase: refusal.status.reasonPhrase)
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: version, status: status, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
    }

    /// Lets go of what the stream holds, once.
    private func end() {
        let open = phase
        phase = .ended
        if case .streaming(let stream) = open { end(stream) }
    }

    private func end(_ stream: HTTPGateway.OpenStream) {
        wake = nil
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
