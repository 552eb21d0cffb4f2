import NIOCore
import NIOConcurrencyHelpers
import NIOPosix
import NotifyProtocol

/// Connection management: every request goes through the current connection, and a lost one is replaced (with
/// backoff) by a new one that the subscriptions are carried over to.
extension NotifyClient {
    /// Runs `body` on the connection; when that was lost, on a new one, and once more when it is lost under `body`.
    nonisolated(nonsending) func withConnection<Result: Sendable>(_ body: nonisolated(nonsending) (Link) async throws -> Result) async throws -> Result {
        let link = try await current()
        do {
            return try await body(link)
        } catch let error as NotifyClientError where Self.isLostConnection(error) && reconnectWithin != nil {
            guard !isClosed.withLockedValue({ $0 }) else { throw error }
            return try await body(reconnect(replacing: link))
        }
    }

    /// Whether `error` says the connection is gone, or going: a request the daemon refused as `unavailable` (it is
    /// shutting down) was not carried out, and is made again on the next connection.
    static func isLostConnection(_ error: NotifyClientError) -> Bool {
        error.kind == .connectionClosed || error.kind == .unreachable || error.refusal?.code == .unavailable
    }

    /// The connection to use: the one there is, or, when it was lost and the client reconnects, a new one.
    nonisolated(nonsending) func current() async throws -> Link {
        let link = self.link.withLockedValue { $0 }
        guard reconnectWithin != nil, !link.channel.isActive, !isClosed.withLockedValue({ $0 }) else { return link }
        return try await reconnect(replacing: link)
    }

    /// A new connection in place of `lost`: made once for all the calls that need it, backing off from 50 ms to 2 s
    /// between attempts (``ReconnectBackoff``), for up to ``reconnectWithin``.
    private func reconnect(replacing lost: Link) async throws -> Link {
        let current = link.withLockedValue { $0 }
        if current.channel !== lost.channel { return current }
        let task = reconnecting.withLockedValue { task -> Task<Link, any Error> in
            if let task { return task }
            let made = Task { [weak self, socketPath, group, echo, reconnectWithin, backoff, publishBuffer] in
                let deadline = ContinuousClock.now + (reconnectWithin ?? .zero)
                // A connection lost soon after it was made is not tried again at once (but within the window).
                if let pause = backoff.withLockedValue({ $0.lost(after: ContinuousClock.now - lost.madeAt) }) {
                    try await Task.sleep(for: min(pause, deadline - ContinuousClock.now))
                }
                while true {
                    do {
                        let link = try await NotifyClient.open(socketPath, group: group, publishBuffer: publishBuffer)
                        if !echo.withLockedValue({ $0 }) {
                            let reply = link.channel.eventLoop.makePromise(of: ServerFrame.self)
                            let handler = link.handler
                            link.channel.eventLoop.execute { handler.value.send(.setEcho(false), reply: reply, written: nil) }
                            _ = try await reply.futureResult.get()
                        }
                        try await self?.carrySubscriptions(from: link)
                        // What the lost connection had not written goes first on this one.
                        let lostHandler = lost.handler
                        if let left = try? await lost.channel.eventLoop.submit({ lostHandler.value.takeLeftoverPublishes() }).get() {
                            link.outbox.prepend(left)
                        }
                        return link
                    } catch let error as NotifyClientError where NotifyClient.isLostConnection(error) {
                        let pause = backoff.withLockedValue { $0.pause() }
                        guard ContinuousClock.now + pause < deadline else {
                            throw NotifyClientError(
                                .unreachable,
                                "the connection to the daemon was lost and it did not come back within \(reconnectWithin ?? .zero): \(error.message)"
                            )
                        }
                        try await Task.sleep(for: pause)
                    }
                }
            }
            task = made
            return made
        }
        defer { reconnecting.withLockedValue { if $0 == task { $0 = nil } } }
        let made = try await task.value
        return link.withLockedValue { link in
            if link.channel === lost.channel { link = made }
            return link
        }
    }

    /// What the current connection's outbox holds, for tests.
    var publishOutboxHeld: (pending: Int, inChannel: Int, waiting: Int) {
        link.withLockedValue { $0 }.outbox.held
    }

    /// Refuses, before sending, what a daemon older than protocol 3 would answer `ERR malformed`.
    func requireResuming(_ what: String) throws {
        guard greeting.version < ServerGreeting.resumingVersion else { return }
        throw NotifyClientError(
            .invalidInput,
            "this notifyd speaks protocol \(greeting.version); \(what) needs protocol \(ServerGreeting.resumingVersion): upgrade notifyd"
        )
    }

    func checkSize(_ payload: ByteBuffer) throws {
        if payload.readableBytes > greeting.limits.maxPayload {
            throw NotifyClientError.payloadTooLarge(payload.readableBytes, limit: greeting.limits.maxPayload)
        }
    }

    func unexpected(_ frame: ServerFrame, for request: String) -> NotifyClientError {
        NotifyClientError.unexpected(frame, for: request)
    }
}
