import NIOCore
import NotifyProtocol

/// What the client sends: requests with their ids, the publish outbox, subscriptions made, carried over and
/// ended, and the flow of deliveries (pausing the daemon, or not reading, while a consumer is behind).
extension ClientChannelHandler {
    /// Sends `command`; `reply`, if given, receives the reply frame (an `ERR` included). `written` completes once
    /// the bytes are handed to the kernel.
    /// `replaysFor` names the local subscription that a `SUB … latest` brings buffered messages to.
    func send(
        _ command: Command,
        reply: EventLoopPromise<ServerFrame>?,
        written: EventLoopPromise<Void>?,
        replaysFor subscription: UInt64? = nil
    ) {
        guard let context, failure == nil, !closedByUser else {
            reply?.fail(closedError)
            written?.fail(closedError)
            return
        }
        let id = takeRequestID()
        if let reply { waiting[id] = .promise(reply) }
        if let subscription {
            replayTargets[id] = subscription
            subscriptions[subscription]?.replaysPending += 1
            if case .subscribe(let pattern, let options) = command, options.since != nil {
                historyReplayPatterns[id] = pattern
                subscriptions[subscription]?.historyReplays[pattern, default: 0] += 1
            }
        }
        // Publishes go through the outbox: what comes here is a line.
        var buffer = context.channel.allocator.buffer(capacity: 64)
        buffer.writeRequest(Request(id: id, command))
        drainOutbox(flush: false)
        context.write(wrapOutboundOut(buffer), promise: written)
        context.flush()
        // Someone waits for the reply: it comes only once what the daemon sent before it is read.
        if reply != nil && !isReading { updateFlow() }
    }

    /// A request id not used on this connection yet: the outbox's, which encodes requests with ids too.
    private func takeRequestID() -> UInt64 {
        if let outbox { return outbox.takeRequestID() }
        defer { nextRequestID += 1 }
        return nextRequestID
    }

    /// Writes the publishes the outbox gathered, ahead of anything written after; who waits for the replies to the
    /// acknowledged ones among them waits here from now on.
    func drainOutbox(flush: Bool = true) {
        guard let context, let outbox, let (bytes, acknowledged) = outbox.take() else { return }
        for publish in acknowledged { waiting[publish.id] = .continuation(publish.reply, onReply: publish.onReply) }
        let count = bytes.readableBytes
        let written = context.eventLoop.makePromise(of: Void.self)
        written.futureResult.whenComplete { _ in outbox.written(count) }
        context.write(wrapOutboundOut(bytes), promise: written)
        if flush { context.flush() }
        // Someone waits for a reply: it comes only once what the daemon sent before it is read.
        if !acknowledged.isEmpty && !isReading { updateFlow() }
    }

    /// Takes what the outbox held when the connection was lost (nil when nothing), once.
    func takeLeftoverPublishes() -> ByteBuffer? {
        defer { leftoverPublishes = nil }
        return leftoverPublishes
    }

    /// Sends `command`, whose answer is `LAST` frames and then `OK` (`HISTORY`): `promise` gets their messages.
    func collect(_ command: Command, into promise: EventLoopPromise<[Delivery]>) {
        guard let context, failure == nil, !closedByUser else {
            promise.fail(closedError)
            return
        }
        let id = takeRequestID()
        collections[id] = ([], promise)
        var buffer = context.channel.allocator.buffer(capacity: 64)
        buffer.writeRequest(Request(id: id, command))
        drainOutbox(flush: false)
        context.write(wrapOutboundOut(buffer), promise: nil)
        context.flush()
        if !isReading { updateFlow() }
    }

    /// Why nothing can be sent: the connection's failure, or that it was closed.
    private var closedError: NotifyClientError {
        failure ?? NotifyClientError(.connectionClosed, "the connection to the daemon is closed")
    }

    /// Takes the errors that fire-and-forget requests got since the last call.
    func takeDeferredErrors() -> [ProtocolError] {
        defer { deferredErrors.removeAll() }
        return deferredErrors
    }

    /// Registers a local subscription before its `SUB` requests go out, so buffered messages sent in reply are
    /// routed to it. Returns its id and the patterns the daemon must be asked for (those no other local
    /// subscription holds).
    func addSubscription(_ subscription: LocalSubscription) -> (id: UInt64, newPatterns: [TopicPattern]) {
        let id = nextSubscriptionID
        nextSubscriptionID += 1
        subscriptions[id] = subscription
        subscription.id = id
        var newPatterns: [TopicPattern] = []
        for pattern in Set(subscription.patterns) {
            routes.insert(id, for: pattern)
            forgetRoutes()
            patternUsers[pattern, default: 0] += 1
            if patternUsers[pattern] == 1 { newPatterns.append(pattern) }
        }
        return (id, newPatterns)
    }

    /// Takes over a subscription from a lost connection and asks the daemon to resume it, each of its patterns from
    /// where it left off; returns its id here (nil when its consumer has stopped meanwhile: it ends). One the daemon
    /// refuses now ends with the refusal.
    @discardableResult
    func adopt(_ subscription: LocalSubscription, connectedAt: PublishTime) -> UInt64? {
        subscription.resume!.connectedAt = connectedAt
        subscription.replaysPending = 0
        subscription.replayed = DeliveredMessages()
        subscription.historyReplays = [:]
        if subscription.resume!.route.isEnded {
            finish(subscription, nil)
            return nil
        }
        guard let eventLoop = context?.eventLoop, failure == nil else {
            // Lost again before it could resume here: on to the next connection.
            handOver?([subscription], closedError)
            return nil
        }
        let (id, _) = addSubscription(subscription)
        subscription.resume!.route.move(to: self, on: eventLoop, id: id)
        if subscription.gauge.isFull { fullSubscriptions.insert(id) }
        let bound = NIOLoopBound(self, eventLoop: eventLoop)
        let options = SubscribeOptions(since: subscription.resume!.resumePoint(for: subscription.patterns), overflow: subscription.resume!.overflow)
        for pattern in Set(subscription.patterns) {
            let reply = eventLoop.makePromise(of: ServerFrame.self)
            send(.subscribe(pattern, options), reply: reply, written: nil, replaysFor: id)
            reply.futureResult.whenSuccess { frame in
                if case .error(let error) = frame { bound.value.end(id, throwing: NotifyClientError.refused(error)) }
            }
        }
        updateFlow()
        return id
    }

    /// Ends subscription `id` with `error`.
    func end(_ id: UInt64, throwing error: any Error) {
        guard let subscription = subscriptions[id] else { return }
        finish(subscription, error)
        removeSubscription(id)
    }

    /// Ends a local subscription; patterns no other local subscription holds are unsubscribed at the daemon.
    func removeSubscription(_ id: UInt64) {
        guard let subscription = subscriptions.removeValue(forKey: id) else { return }
        finish(subscription, nil)
        if fullSubscriptions.remove(id) != nil { updateFlow() }
        for pattern in Set(subscription.patterns) {
            routes.remove(id, for: pattern)
            forgetRoutes()
            patternUsers[pattern, default: 1] -= 1
            if patternUsers[pattern] == 0 {
                patternUsers[pattern] = nil
                if context != nil, failure == nil, !closedByUser {
                    send(.unsubscribe(pattern), reply: nil, written: nil)
                }
            }
        }
    }

    /// Notes that the consumer of subscription `id` took it back under its low-water marks. It may have filled up
    /// again since it said so: its gauge decides.
    func subscriptionCaughtUp(_ id: UInt64) {
        guard let subscription = subscriptions[id], !subscription.gauge.isFull else { return }
        announceLocalDrops(of: subscription)
        if fullSubscriptions.remove(id) != nil { updateFlow() }
    }

    /// Pauses or resumes deliveries at the daemon, and stops or resumes reading, as the subscriptions' levels say.
    func updateFlow() {
        guard let context, failure == nil, !closedByUser else { return }
        let holdingBack = !fullSubscriptions.isEmpty
        if daemonPauses && holdingBack != pausedAtDaemon {
            pausedAtDaemon = holdingBack
            send(.setDeliveriesPaused(holdingBack), reply: nil, written: nil)
        }
        let atHardLimit = holdingBack && fullSubscriptions.contains { subscriptions[$0]?.gauge.isAtHardLimit == true }
        // A reply someone waits for is always read for: that someone may be the consumer that would catch up.
        let replyAwaited = !waiting.isEmpty || !collections.isEmpty
        let reading = replyAwaited || (!atHardLimit && (daemonPauses || !holdingBack))
        isReadingPastLimit = reading && atHardLimit
        guard reading != isReading else { return }
        isReading = reading
        // Turning autoRead back on also reads at once.
        context.channel.setOption(ChannelOptions.autoRead, value: reading).whenFailure { _ in }
    }

    /// Closes the connection on the user's behalf, once what the outbox holds is written: subscriptions end
    /// normally, waiting requests fail.
    func close() {
        guard let context else { return }
        drainOutbox(flush: false)
        closedByUser = true
        // Writes complete in order: once an empty one has, so have the publishes before it.
        let written = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(capacity: 0)), promise: written)
        written.futureResult.whenComplete { [channel = context.channel] _ in channel.close(promise: nil) }
    }
}
