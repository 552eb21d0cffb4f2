import HTTPTypes
import AsyncAlgorithms
import Hummingbird
import NIOCore
import NotifyBus
import ServiceLifecycle

/// `GET /<topics>/json|sse|raw`: a subscription of the daemon's, streamed. Each stream has a connection of its own
/// to the daemon (a slow reader holds up no other stream); what the daemon drops for a reader that falls behind
/// comes as a `dropped` event; the library's reconnect carries the stream over a restart of the daemon, without a gap.
extension HTTPGateway {
    /// The most bytes of events one write gathers: what a burst brings is written at once, up to this.
    static let writeBatch = 64 << 10

    func stream(_ request: Request, topics segment: Substring, format: StreamFormat, client address: String) async throws -> Response {
        let patterns = try TopicList.patterns(segment)
        let query = request.uri.queryParameters
        let poll = ["1", "true", "yes"].contains(query["poll"] ?? "")
        var since = try Since(parsing: query["since"] ?? "", now: .now())
        // A poll with no `since` asks for what is kept, as ntfy's does.
        if poll, since == .none { since = .all }
        try streamLimits.acquire(address)
        let client: NotifyClient
        do {
            client = try await link.streamClient()
        } catch {
            streamLimits.release(address)
            throw GatewayError(error)
        }
        let lease = StreamLease(limits: streamLimits, address: address, client: client)
        let subscription: NotifySubscription
        do {
            subscription = try await client.subscribe(to: patterns, latestFirst: since == .latest, since: since.resumePoint(for: patterns))
        } catch {
            await lease.end()
            throw GatewayError(error)
        }
        let headers: HTTPFields = [.contentType: format.contentType, .cacheControl: "no-cache"]
        if poll {
            let body: ByteBuffer
            do {
                body = try await HTTPGateway.replay(subscription, on: client, as: format)
            } catch {
                await lease.end()
                throw error
            }
            await lease.end()
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: body))
        }
        let names = patterns.map(\.text).joined(separator: ",")
        let keepalive = configuration.keepalive
        return Response(status: .ok, headers: headers, body: ResponseBody { writer in
            do {
                try await HTTPGateway.pump(subscription, names: names, format: format, keepalive: keepalive, into: &writer)
            } catch {
                await lease.end()
                throw error
            }
            await lease.end()
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

    /// Writes `open`, then the subscription's events as they come, gathered per write, and a `keepalive` at each
    /// `keepalive` interval, until the reader goes away (a write fails) or the subscription ends.
    static func pump(
        _ subscription: NotifySubscription,
        names: String,
        format: StreamFormat,
        keepalive: Duration,
        into writer: inout any ResponseBodyWriter
    ) async throws {
        var opening = ByteBuffer()
        format.write(.open(topics: names, at: .now()), into: &opening)
        if opening.readableBytes > 0 { try await writer.write(opening) }
        // No buffer: each side waits for the writer, so a reader that does not keep up leaves the events with the
        // subscription, whose bounds (and the daemon's) decide what is dropped, and say so.
        let writes = AsyncChannel<ByteBuffer>()
        // A stream has no end of its own: a gateway that is stopped ends it (its writes end), as a reader that goes
        // away does.
        try await withGracefulShutdownHandler {
            try await pump(subscription, names: names, format: format, keepalive: keepalive, through: writes, into: &writer)
        } onGracefulShutdown: {
            writes.finish()
        }
    }

    /// The events and keepalives of ``pump(_:names:format:keepalive:into:)``, each written as `writes` hands it over.
    private static func pump(
        _ subscription: NotifySubscription,
        names: String,
        format: StreamFormat,
        keepalive: Duration,
        through writes: AsyncChannel<ByteBuffer>,
        into writer: inout any ResponseBodyWriter
    ) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                defer { writes.finish() }
                var events = subscription.makeAsyncIterator()
                while let first = try await events.next() {
                    var buffer = ByteBuffer()
                    format.write(GatewayEvent(first), into: &buffer)
                    while buffer.readableBytes < writeBatch, let event = events.nextAtHand() {
                        format.write(GatewayEvent(event), into: &buffer)
                    }
                    await writes.send(buffer)
                }
            }
            group.addTask {
                while true {
                    do {
                        try await Task.sleep(for: keepalive)
                    } catch {
                        return
                    }
                    var buffer = ByteBuffer()
                    format.write(.keepalive(topics: names, at: .now()), into: &buffer)
                    await writes.send(buffer)
                }
            }
            for await buffer in writes { try await writer.write(buffer) }
            group.cancelAll()
            try await group.waitForAll()
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
