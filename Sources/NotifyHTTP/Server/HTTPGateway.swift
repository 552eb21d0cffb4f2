public import Hummingbird
import HTTPTypes
import NIOCore
import NotifyBus

/// The HTTP gateway (`notifyd-http`): ntfy's API and notifyd's own over a client of the daemon, with no broker of
/// its own. It publishes, answers `latest`, and streams subscriptions as JSON lines, Server-Sent Events or raw
/// lines; the daemon's access rules and limits apply to the gateway's user, as to any client's.
public struct HTTPGateway: Sendable {
    let configuration: GatewayConfiguration
    let link: GatewayDaemonLink
    /// The connections the streams share.
    let hub: StreamHub
    /// The keepalives of every stream, from one task.
    let keepalives: KeepaliveTicker
    let streamLimits: StreamLimits
    let retainedShares: RetainedShares
    /// The gateway's own counters, for `/metrics`.
    let metrics = GatewayMetrics()

    /// A gateway to the daemon that `configuration` names.
    public init(configuration: GatewayConfiguration) {
        self.configuration = configuration
        self.link = GatewayDaemonLink(socketPath: configuration.socketPath)
        self.hub = StreamHub(socketPath: configuration.socketPath, connections: configuration.streamConnections)
        self.keepalives = KeepaliveTicker(interval: configuration.keepalive)
        self.streamLimits = StreamLimits(total: configuration.maxStreams, perClient: configuration.maxStreamsPerAddress)
        self.retainedShares = RetainedShares(
            perClient: (configuration.maxRetainedTopicsPerAddress, configuration.maxRetainedBytesPerAddress),
            total: 4 * configuration.maxRetainedTopicsPerAddress
        )
    }

    /// The shared connection to the daemon, for publishes and `latest`.
    func daemon() async throws -> NotifyClient {
        do {
            return try await link.shared()
        } catch {
            throw GatewayError(error)
        }
    }

    /// The routes: `POST /` (ntfy's JSON publish), `PUT`/`POST /<topic>`, `GET /<topic>/latest`,
    /// `GET /<topics>/json|sse|raw`, and `GET /metrics` (Prometheus); behind the token check when there are tokens.
    public func router() -> Router<GatewayContext> {
        let router = Router(context: GatewayContext.self)
        addChecks(to: router)
        router.get("/") { request, context in try await self.page(request, client: context.client) }
        router.get("metrics") { _, _ in await self.prometheusMetrics() }
        router.post("/") { request, context in try await self.publishJSON(request, client: context.client) }
        router.put(":topic") { request, context in
            try await self.publish(request, topic: try context.parameters.require("topic")[...], client: context.client)
        }
        router.post(":topic") { request, context in
            try await self.publish(request, topic: try context.parameters.require("topic")[...], client: context.client)
        }
        router.get(":topic/latest") { _, context in try await self.latest(topic: try context.parameters.require("topic")[...]) }
        for format in StreamFormat.httpStreams {
            // One name for the first segment in every route (the router wants it so): here it lists topics.
            router.get(RouterPath(":topic/\(format.rawValue)")) { request, context in
                try await self.stream(request, topics: try context.parameters.require("topic")[...], format: format, client: context.client)
            }
        }
        return router
    }

    /// The checks every route is behind: `Host` and `Origin` first, then the token, when there are tokens; the
    /// count of responses by status before them, so that their refusals count too (a WebSocket upgrade's as well).
    func addChecks<Context: GatewayRequestContext>(to router: Router<Context>) {
        router.add(middleware: MetricsMiddleware(metrics: metrics))
        router.add(middleware: SameOriginMiddleware(policy: configuration.sameOrigin))
        if let tokens = configuration.tokens { router.add(middleware: TokenMiddleware(tokens: tokens)) }
    }

    /// Why the checks refuse a request that gives these `Host`, `Origin` and `Authorization` headers and `?auth=`
    /// parameter, on a connection to `local`, and reads or publishes: what the middlewares of ``addChecks(to:)``
    /// decide, for a stream served outside the router (``StreamResponder``). Nil when they let it through.
    func refusal(host: String?, origin: String?, authorization: String?, auth: Substring?, reading: Bool, local: SocketAddress?) -> GatewayError? {
        if let refusal = configuration.sameOrigin.refusal(host: host, origin: origin, local: local) {
            return GatewayError(.forbidden, refusal)
        }
        guard let tokens = configuration.tokens else { return nil }
        return TokenMiddleware<GatewayContext>.refusal(tokens: tokens, authorization: authorization, auth: auth, reading: reading)
    }

    /// Lets go of the connections to the daemon.
    public func close() async {
        keepalives.stop()
        await hub.close()
        await link.close()
    }

    /// The most topics the page lists as it is written; the script adds those that publish later.
    static let pageRows = 2_000

    /// `GET /`: the page, listing the buffered message of each topic `?filter=` matches (all but `$…` topics by default).
    func page(_ request: Request, client address: String) async throws -> Response {
        let filter = String(request.uri.queryParameters["filter"] ?? ">")
        var latest: [Delivery] = []
        var problem: String?
        do {
            let stream = try await openStream(try TopicList.patterns(filter[...]), since: .latest, client: address)
            defer { stream.lease.end() }
            for case .message(let delivery) in stream.queue.takeAtHand() where latest.count < HTTPGateway.pageRows {
                latest.append(delivery)
            }
        } catch let error as GatewayError {
            problem = error.sentence
        } catch {
            problem = GatewayError(error).sentence
        }
        let auth = request.uri.queryParameters["auth"].map(String.init)
        let html = PageRenderer.page(filter: filter, latest: latest, error: problem, auth: auth)
        return Response(status: .ok, headers: [.contentType: "text/html; charset=utf-8"], body: .init(byteBuffer: ByteBuffer(string: html)))
    }

    /// `GET /<topic>/latest`: the topic's buffered message, as a stream would send it, or 404.
    func latest(topic segment: Substring) async throws -> Response {
        let topic = try TopicList.topic(segment)
        let client = try await daemon()
        let buffered: Delivery?
        do {
            buffered = try await client.latest(topic)
        } catch {
            throw GatewayError(error)
        }
        guard let buffered else {
            throw GatewayError(.notFound, "nothing is buffered for topic \"\(topic.name)\"; it has no messages yet, was cleared, or only got messages sent without retaining")
        }
        var body = ByteBuffer()
        GatewayEvent.message(buffered).writeJSON(into: &body)
        body.writeStaticString("\n")
        return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: body))
    }
}
