import HummingbirdCore
import HummingbirdWebSocket
import NIOCore
import NIOHTTP1
import NIOWebSocket

extension HTTPGateway {
    /// Makes a connection's pipeline, set up for Hummingbird, serve `format`'s stream on its event loop instead (see
    /// ``FirstRequestRouter``): it keeps the HTTP/1 decoder and encoder, with a ``StreamResponder`` in place of the
    /// handler that would wait for the request's head. For `/ws`, NIO's WebSocket upgrade takes that place: it upgrades
    /// a request the checks let through (``streamRefusal(_:query:local:)``), and leaves any other to an HTTP
    /// responder, which refuses it as the route would.
    func serveStream(on channel: any Channel, as format: StreamFormat) throws {
        let pipeline = channel.pipeline.syncOperations
        let hummingbird = try pipeline.context(handlerType: NIOTypedHTTPServerUpgradeHandler<HTTP1WebSocketUpgradeChannel.UpgradeResult>.self)
        pipeline.removeHandler(context: hummingbird, promise: nil)
        guard format == .webSocket else {
            try pipeline.addHandler(StreamResponder<HTTPStreamTransport>(gateway: self, format: format))
            return
        }
        let gateway = self
        // NIO's upgrade hands on no head it refused to upgrade: kept here, for the responder that refuses it.
        let refused = NIOLoopBoundBox<HTTPRequestHead?>(nil, eventLoop: channel.eventLoop)
        let upgrader = NIOTypedWebSocketServerUpgrader<Void>(
            shouldUpgrade: { channel, head in
                guard gateway.streamRefusal(head, query: URI(head.uri).queryParameters, local: channel.localAddress) == nil else {
                    refused.value = head
                    return channel.eventLoop.makeSucceededFuture(nil)
                }
                return channel.eventLoop.makeSucceededFuture(HTTPHeaders())
            },
            upgradePipelineHandler: { channel, head in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(StreamResponder<WebSocketStreamTransport>(gateway: gateway, format: .webSocket, head: head))
                }
            }
        )
        let upgrade = NIOTypedHTTPServerUpgradeHandler(
            httpEncoder: try pipeline.handler(type: HTTPResponseEncoder.self),
            extraHTTPHandlers: [try pipeline.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)],
            upgradeConfiguration: .init(upgraders: [upgrader]) { channel in
                channel.eventLoop.makeCompletedFuture {
                    let responder = StreamResponder<HTTPStreamTransport>(gateway: gateway, format: .webSocket, head: refused.value)
                    try channel.pipeline.syncOperations.addHandler(responder)
                }
            }
        )
        try pipeline.addHandler(upgrade)
    }
}
