public import Hummingbird
public import HummingbirdWebSocket
public import NIOCore
import NIOWebSocket
import NotifyBus

/// A WebSocket request's context: Hummingbird's, the upgrade's, and the addresses of its connection.
public struct GatewayWebSocketContext: GatewayRequestContext, WebSocketRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let webSocket: WebSocketHandlerReference<Self>
    public let remoteAddress: SocketAddress?
    public let localAddress: SocketAddress?

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.webSocket = .init()
        self.remoteAddress = source.channel.remoteAddress
        self.localAddress = source.channel.localAddress
    }
}

/// `GET /<topics>/ws`: the stream as a WebSocket (ntfy's), each event a text message with its JSON object. What the
/// client sends is not read as requests; its close ends the stream.
extension HTTPGateway {
    /// The routes that upgrade to a WebSocket, behind the token check when there are tokens.
    public func webSocketRouter() -> Router<GatewayWebSocketContext> {
        let router = Router(context: GatewayWebSocketContext.self)
        addChecks(to: router)
        router.ws(":topic/ws") { request, context in
            // Refused before the upgrade, as an HTTP error, when the path or `since` is bad.
            _ = try TopicList.patterns(try context.parameters.require("topic")[...])
            _ = try Since(parsing: request.uri.queryParameters["since"] ?? "", now: .now())
            return .upgrade([:])
        } onUpgrade: { inbound, outbound, context in
            let address = context.requestContext.client
            let topics = try context.requestContext.parameters.require("topic")[...]
            let stream: OpenStream
            do {
                stream = try await self.openStream(topics: topics, query: context.request.uri.queryParameters, poll: false, client: address)
            } catch let error as GatewayError {
                let close = error.webSocketClose
                try await outbound.close(close.code, reason: close.reason)
                return
            }
            let keepalives = self.keepalives, metrics = self.metrics
            do {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    // The client's close (or its connection's end) ends the stream.
                    group.addTask {
                        for try await _ in inbound {}
                    }
                    group.addTask {
                        try await HTTPGateway.pump(stream, format: .webSocket, keepalives: keepalives, metrics: metrics) { buffer in
                            // The event's bytes as the frame's, as they are: no string made of them on the way.
                            try await outbound.write(.custom(WebSocketFrame(fin: true, opcode: .text, data: buffer)))
                        }
                    }
                    try await group.next()
                    group.cancelAll()
                }
            } catch {
                stream.lease.end()
                throw error
            }
            stream.lease.end()
        }
        return router
    }
}
