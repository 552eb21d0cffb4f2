import HTTPTypes
import Hummingbird
import HummingbirdCore
import NIOCore
import NotifyBus
import ServiceLifecycle

/// `GET /<topics>/json|sse|raw`: a subscription of the daemon's, streamed. The streams share a few connections to the
/// daemon (``StreamHub``); each has a bounded queue of its own (``StreamQueue``), so a slow reader holds up no other
/// stream. What the daemon drops for the gateway comes as a `dropped` event, and so does what a stream's queue drops
/// for a reader that falls behind; the library's reconnect carries the streams over a restart of the daemon, without
/// a gap.
extension HTTPGateway {
    /// The most bytes of events one write gathers: what a burst brings is written at once, up to this.
    static let writeBatch = 64 << 10

    /// A stream's queue, and what it holds until it ends.
    struct OpenStream {
        let queue: StreamQueue
        let lease: StreamLease
        let names: String
    }

    /// Opens the subscription a stream of `address`'s asks for (its topics, `since=`), within the bounds on streams.
    func openStream(topics segment: Substring, query: FlatDictionary<Substring, Substring>, poll: Bool, client address: String) async throws -> OpenStream {
        let patterns = try TopicList.patterns(segment)
        var since = try Since(parsing: query["since"] ?? "", now: .now())
        // A poll with no `since` asks for what is kept, as ntfy's does.
        if poll, since == .none { since = .all }
        return try await openStream(patterns, since: since, client: address)
    }

    /// Opens a subscription of `address`'s to `patterns` from `since`, within the bounds on streams. What the daemon
    /// replays for it (`since`, the latest) is in its queue when this returns.
    func openStream(_ patterns: [TopicPattern], since: Since, client address: String) async throws -> OpenStream {
        try streamLimits.acquire(address)
        metrics.streamOpened()
        let queue = StreamQueue(limit: configuration.streamBuffer)
        let lease = StreamLease(limits: streamLimits, address: address)
        do {
            let subscription = try await hub.subscribe(
                to: patterns,
                since: since.resumePoint(for: patterns),
                latestFirst: since == .latest,
                sink: { queue.push(GatewayEvent($0)) },
                finished: { _ in queue.finish() }
            )
            lease.hold(subscription)
        } catch {
            lease.end()
            throw GatewayError(error)
        }
        return OpenStream(queue: queue, lease: lease, names: patterns.map(\.text).joined(separator: ","))
    }

    func stream(_ request: Request, topics segment: Substring, format: StreamFormat, client address: String) async throws -> Response {
        var query = request.uri.queryParameters
        let poll = ["1", "true", "yes"].contains(query["poll"] ?? "")
        // An EventSource that reconnects says where it was: resumed from there, as `since=` would.
        if query["since"] == nil, let last = request.headers[HTTPField.Name("Last-Event-ID")!], MessageID(last[...]) != nil {
            query["since"] = last[...]
        }
        let stream = try await openStream(topics: segment, query: query, poll: poll, client: address)
        let headers: HTTPFields = [.contentType: format.contentType, .cacheControl: "no-cache"]
        if poll {
            defer { stream.lease.end() }
            var body = ByteBuffer()
            for event in stream.queue.takeAtHand() { format.write(event, into: &body) }
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: body))
        }
        let keepalives = self.keepalives, metrics = self.metrics
        return Response(status: .ok, headers: headers, body: ResponseBody { writer in
            defer { stream.lease.end() }
            try await HTTPGateway.pump(stream, format: format, keepalives: keepalives, metrics: metrics) { try await writer.write($0) }
            try await writer.finish(nil)
        })
    }

    /// Writes `open`, then the stream's events as they come, and a `keepalive` at each of `keepalives`' ticks when
    /// nothing else flows, until the reader goes away (a write fails), the subscription ends, or the gateway stops.
    /// Each write gathers what waits in the queue, except for a format whose every event is a write of its own (a
    /// WebSocket's frames).
    static func pump(
        _ stream: OpenStream,
        format: StreamFormat,
        keepalives: KeepaliveTicker,
        metrics: GatewayMetrics,
        write: (ByteBuffer) async throws -> Void
    ) async throws {
        var opening = ByteBuffer()
        format.write(.open(topics: stream.names, at: .now()), into: &opening)
        if opening.readableBytes > 0 { try await write(opening) }
        let queue = stream.queue
        keepalives.add(queue, names: stream.names)
        defer {
            keepalives.remove(queue)
            queue.finish()
        }
        // Ended by the gateway's stop, or by the task's cancellation (a WebSocket's client closed): the queue's end
        // ends the loop, which waits for the queue alone.
        try await withTaskCancellationHandler {
            try await withGracefulShutdownHandler {
                while let events = await queue.take(upTo: writeBatch) {
                    for case .dropped(let notice, _) in events { metrics.streamDropped(notice.count) }
                    if format.isFramedPerEvent {
                        for event in events {
                            var frame = ByteBuffer()
                            format.write(event, into: &frame)
                            try await write(frame)
                            metrics.streamed(frame.readableBytes)
                        }
                    } else {
                        var batch = ByteBuffer()
                        for event in events { format.write(event, into: &batch) }
                        try await write(batch)
                        metrics.streamed(batch.readableBytes)
                    }
                }
            } onGracefulShutdown: {
                queue.finish()
            }
        } onCancel: {
            queue.finish()
        }
    }
}

extension GatewayEvent {
    /// The event for what a subscription received.
    init(_ event: SubscriptionEvent) {
        switch event {
        case .message(let delivery): self = .message(delivery)
        case .dropped(let notice): self = .dropped(notice, at: .now())
        }
    }
}
