import HummingbirdCore
import HummingbirdWebSocket
import NIOCore
import NIOHTTP1
import NIOWebSocket

extension HTTPGateway {
    /// Makes a connection's pipeline, set up for Hummingbird, serve `format`'s stream on its event loop instead (see
    /// ``FirstRequestRouter``): it keeps the HTTP/1 decoder and encoder, with a ``StreamResponder`` in place of the
    /// handler that would wait for the request's head. For `/ws`, NIO's WebSocket upgrade takes that place: it upgrades
    /// a request the checks let through (``streamRefusal(_:uri:local:)``), and leaves any other to an HTTP
    /// responder, which refuses it as the route would.
    func serveStream(on channel: any Channel, as format: StreamFormat, client: String) throws {
        let pipeline = channel.pipeline.syncOperations
        let hummingbird = try pipeline.context(handlerType: NIOTypedHTTPServerUpgradeHandler<HTTP1WebSocketUpgradeChannel.UpgradeResult>.self)
        pipeline.removeHandler(context: hummingbird, promise: nil)
        guard format == .webSocket else {
            try pipeline.addHandler(StreamResponder<HTTPStreamTransport>(gateway: self, format: format, client: client))
            return
        }
        let gateway = self
        // NIO's upgrade hands on no head it refused to upgrade: kept here, for the responder that refuses it.
        let refused = NIOLoopBoundBox<HTTPRequestHead?>(nil, eventLoop: channel.eventLoop)
        let handshake = NIOTypedWebSocketServerUpgrader<Void>(
            shouldUpgrade: { channel, head in
                guard gateway.streamRefusal(head, uri: URI(head.uri), local: channel.localAddress) == nil else {
                    refused.value = head
                    return channel.eventLoop.makeSucceededFuture(nil)
                }
                return channel.eventLoop.makeSucceededFuture(HTTPHeaders())
            },
            upgradePipelineHandler: { channel, _ in channel.eventLoop.makeSucceededVoidFuture() }
        )
        let upgrader = StreamWebSocketUpgrader(handshake: handshake, gateway: gateway, client: client)
        let upgrade = NIOTypedHTTPServerUpgradeHandler(
            httpEncoder: try pipeline.handler(type: HTTPResponseEncoder.self),
            extraHTTPHandlers: [try pipeline.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)],
            upgradeConfiguration: .init(upgraders: [upgrader]) { channel in
                channel.eventLoop.makeCompletedFuture {
                    let responder = StreamResponder<HTTPStreamTransport>(gateway: gateway, format: .webSocket, client: client, head: refused.value)
                    try channel.pipeline.syncOperations.addHandler(responder)
                }
            }
        )
        try pipeline.addHandler(upgrade)
    }
}

/// NIO's WebSocket upgrade, but for the pipeline it leaves: the handshake is NIO's (the key checked, the accept
/// computed); the upgraded pipeline has NIO's frame decoder and a ``StreamResponder``, which writes whole frames
/// itself (``WebSocketStreamTransport``) where NIO's would add its frame encoder and its error handler, which writes
/// frames of its own.
struct StreamWebSocketUpgrader: NIOTypedHTTPServerProtocolUpgrader {
    typealias UpgradeResult = Void

    let handshake: NIOTypedWebSocketServerUpgrader<Void>
    let gateway: HTTPGateway
    let client: String

    var supportedProtocol: String { handshake.supportedProtocol }
    var requiredUpgradeHeaders: [String] { handshake.requiredUpgradeHeaders }

    func buildUpgradeResponse(channel: any Channel, upgradeRequest: HTTPRequestHead, initialResponseHeaders: HTTPHeaders) -> EventLoopFuture<HTTPHeaders> {
        handshake.buildUpgradeResponse(channel: channel, upgradeRequest: upgradeRequest, initialResponseHeaders: initialResponseHeaders)
    }

    func upgrade(channel: any Channel, upgradeRequest: HTTPRequestHead) -> EventLoopFuture<Void> {
        let gateway = self.gateway, client = self.client
        return channel.eventLoop.makeCompletedFuture {
            // A client's frames are read up to 16 KiB: it sends pings and its close, nothing more.
            try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: 1 << 14)))
            try channel.pipeline.syncOperations.addHandler(StreamResponder<WebSocketStreamTransport>(gateway: gateway, format: .webSocket, client: client, head: upgradeRequest))
        }
    }
}
