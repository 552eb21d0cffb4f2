import HTTPTypes
import Hummingbird
import HummingbirdCore
import NIOCore
import NotifyBus
import ServiceLifecycle

/// `GET /<topics>/json|sse|raw`: a subscription of the daemon's, streamed. Each stream has a connection of its own
/// to the daemon (a slow reader holds up no other stream); what the daemon drops for a reader that falls behind
/// comes as a `dropped` event, and so does what the stream's own queue drops for a reader that stops (see
/// ``StreamQueue``); the library's reconnect carries the stream over a restart of the daemon, without a gap.
extension HTTPGateway {
    /// The most bytes of events one write gathers: what a burst brings is written at once, up to this.
    static let writeBatch = 64 << 10

    /// A stream's subscription, and what it holds until it ends.
    struct OpenStream {
        let subscription: NotifySubscription
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

    /// Opens a subscription of `address`'s to `patterns` from `since`, within the bounds on streams.
    func openStream(_ patterns: [TopicPattern], since: Since, client address: String) async throws -> OpenStream {
        try streamLimits.acquire(address)
        metrics.streamOpened()
        let client: NotifyClient
        do {
            client = try await link.streamClient()
        } catch {
            streamLimits.release(address)
            throw GatewayError(error)
        }
        let lease = StreamLease(limits: streamLimits, address: address, client: client)
        do {
            let subscription = try await client.subscribe(
                to: patterns,
                latestFirst: since == .latest,
                since: since.resumePoint(for: patterns),
                buffer: HTTPGateway.subscriptionBuffer
            )
            return OpenStream(subscription: subscription, lease: lease, names: patterns.map(\.text).joined(separator: ","))
        } catch {
            await lease.end()
            throw GatewayError(error)
        }
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
            defer { Task { await stream.lease.end() } }
            let body = try await HTTPGateway.replay(stream.subscription, on: stream.lease.client, as: format)
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: body))
        }
        let keepalive = configuration.keepalive, buffer = configuration.streamBuffer, stall = configuration.streamStall
        let metrics = self.metrics
        return Response(status: .ok, headers: headers, body: ResponseBody { writer in
            do {
                try await HTTPGateway.pump(stream, format: format, keepalive: keepalive, buffer: buffer, stall: stall, metrics: metrics) {
                    try await writer.write($0)
                }
            } catch {
                await stream.lease.end()
                throw error
            }
            await stream.lease.end()
            try await writer.finish(nil)
        })
    }

    /// `?poll=1`: what the subscription replayed (its history, or its buffered messages), then nothing more.
    static func replay(_ subscription: NotifySubscription, on client: NotifyClient, as format: StreamFormat) async throws -> ByteBuffer {
        // The replay came before the subscription's OK; a round trip after it makes sure the client has handed
        // every event of it to the subscription.
        do {
            try await client.flush()
        } catch {
            throw GatewayError(error)
        }
        var body = ByteBuffer()
        var events = subscription.makeAsyncIterator()
        while let event = events.nextAtHand() { format.write(GatewayEvent(event), into: &body) }
        return body
    }

    /// What a stream's subscription holds before the stream's queue takes it: little, since the queue takes each
    /// event as it comes (see ``StreamQueue``).
    static let subscriptionBuffer = SubscriptionBufferLimits(highEvents: 256, highBytes: 64 << 10)

    /// Writes `open`, then the subscription's events as they come, and a `keepalive` at each `keepalive`
    /// interval when nothing else flows, until the reader goes away (a write fails), the subscription ends, or the
    /// gateway stops. Events wait in a ``StreamQueue`` of `buffer` bytes, which holds the subscription back while the
    /// reader moves and drops its oldest (announced) once the reader has taken nothing for `stall`; each write
    /// gathers what waits, except for a format whose every event is a write of its own (a WebSocket's frames).
    static func pump(
        _ stream: OpenStream,
        format: StreamFormat,
        keepalive: Duration,
        buffer: Int,
        stall: Duration,
        metrics: GatewayMetrics,
        write: (ByteBuffer) async throws -> Void
    ) async throws {
        var opening = ByteBuffer()
        format.write(.open(topics: stream.names, at: .now()), into: &opening)
        if opening.readableBytes > 0 { try await write(opening) }
        let queue = StreamQueue(limit: buffer, stallAfter: stall)
        // A stream has no end of its own: a gateway that is stopped ends it (its writes end), as a reader that goes
        // away does.
        try await withGracefulShutdownHandler {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await produce(stream.subscription, into: queue) }
                group.addTask { await beat(every: keepalive, names: stream.names, into: queue) }
                // However the writes end, a producer waiting for room must go on to see it is cancelled.
                defer { queue.finish() }
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
                group.cancelAll()
                try await group.waitForAll()
            }
        } onGracefulShutdown: {
            queue.finish()
        }
    }

    /// Hands the subscription's events to `queue` as they come, gathered up to a write's worth at a time, each batch
    /// once there is room for it or the reader has stopped (see ``StreamQueue``), until the subscription ends.
    private static func produce(_ subscription: NotifySubscription, into queue: StreamQueue) async throws {
        defer { queue.finish() }
        // A batch is at most half the queue, so that what a moving reader's queue holds stays near its limit.
        let most = min(writeBatch, max(queue.limit / 2, 1))
        var events = subscription.makeAsyncIterator()
        var batch: [GatewayEvent] = []
        while let first = try await events.next() {
            batch.append(GatewayEvent(first))
            var bytes = StreamQueue.size(of: batch[0])
            while bytes < most, let event = events.nextAtHand() {
                batch.append(GatewayEvent(event))
                bytes += StreamQueue.size(of: batch[batch.count - 1])
            }
            await queue.waitForRoom(for: bytes)
            queue.push(contentsOf: batch)
            batch.removeAll(keepingCapacity: true)
        }
    }

    /// Hands a `keepalive` to `queue` at each interval, until cancelled.
    private static func beat(every interval: Duration, names: String, into queue: StreamQueue) async {
        while true {
            do {
                try await Task.sleep(for: interval)
            } catch {
                return
            }
            queue.pushKeepalive(.keepalive(topics: names, at: .now()))
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
