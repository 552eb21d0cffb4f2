import NIOCore

/// The client's end of a connection: gives every request an id, matches replies to the requests waiting for them,
/// and hands deliveries to the local subscriptions whose patterns match.
///
/// It also keeps the connection from reading ahead of the consumers: a subscription whose consumer falls behind
/// fills up to its ``SubscriptionBufferLimits``; then deliveries are paused at the daemon (`OPT pause`), which queues
/// them under their overflow policy while its replies still come, and resumed once the consumer caught up. A
/// daemon that cannot pause (protocol 1) is simply not read while a subscription is full. A subscription at its hard
/// limit (what the daemon sent before it paused may take it there) stops the reading; if someone waits for a reply
/// meanwhile, the connection reads on, and what that brings for a subscription at its limit is dropped here and
/// announced to its consumer like the daemon's drops (see ``DropTally``), so nothing waits on a consumer that
/// waits for the reply, and nothing is held beyond the limit.
///
/// Like every `ChannelHandler`, it is used only on its channel's event loop; ``NotifyClient`` reaches it through
/// `NIOLoopBound`. So the fields every delivery touches skip the runtime's exclusivity checks, as the daemon's
/// connection handler's do: one thread, and no access to a field while another to it is under way.
final class ClientChannelHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// Takes the subscriptions that can resume when the connection is lost (not closed by the user), instead of
    /// ending them: a client that reconnects carries them to its next connection.
    var handOver: (([LocalSubscription], NotifyClientError) -> Void)?

    private var context: ChannelHandlerContext?
    private let greeting: EventLoopPromise<ServerGreeting>
    /// Decodes here rather than in a `ByteToMessageHandler` of its own, as the daemon does: passing each frame down
    /// the pipeline boxes it in an existential and casts it back, which cost more than the rest of a delivery.
    @exclusivity(unchecked) private var decoder = ServerFrameDecoder()
    /// The start of a frame whose end has not arrived yet; nil between frames.
    @exclusivity(unchecked) private var unread: ByteBuffer?
    /// The most bytes one frame may take: the largest payload any daemon may announce and its line. A list (`TOPICS`,
    /// `STATS`) says how many lines follow, a number a peer at the socket chooses; past this it is not one a daemon
    /// sends (its pages are 10,000 lines), and the connection is closed rather than its bytes held.
    var largestFrame = ProtocolLimits.largestPayload + 64 << 10
    private var nextRequestID: UInt64 = 1
    /// Requests whose reply someone waits for, by id. Requests without one (publishes without ack) are not
    /// listed: an `ERR` with an id found nowhere here belongs to one of them.
    @exclusivity(unchecked) private var waiting: [UInt64: ReplyWaiter] = [:]
    /// Requests answered by several `LAST` frames and then an `OK` (`HISTORY`): what came so far, and who waits.
    private var collections: [UInt64: (deliveries: [Delivery], promise: EventLoopPromise<[Delivery]>)] = [:]
    /// Errors that fire-and-forget requests received, for the next `flush` to report.
    private var deferredErrors: [ProtocolError] = []
    @exclusivity(unchecked) private var subscriptions: [UInt64: LocalSubscription] = [:]
    private var nextSubscriptionID: UInt64 = 1
    /// Local subscription id per pattern, to route deliveries without testing every pattern.
    private let routes = SubscriptionIndex<UInt64>()
    /// How many local subscriptions hold each pattern; the daemon holds it once.
    private var patternUsers: [TopicPattern: Int] = [:]
    /// The local subscription each `SUB … latest` still waiting for its `OK` was sent for, by request id: the
    /// buffered messages it brings (`LAST` frames with that id) are for that subscription alone.
    private var replayTargets: [UInt64: UInt64] = [:]
    /// The pattern of each `SUB … since=` not answered yet, by request id (see ``LocalSubscription/historyReplays``).
    private var historyReplayPatterns: [UInt64: TopicPattern] = [:]
    /// The subscriptions over their high-water marks whose consumers have not caught up yet.
    @exclusivity(unchecked) private var fullSubscriptions: Set<UInt64> = []
    /// Whether the daemon understands `OPT pause` (protocol 2 and later).
    private var daemonPauses = false
    /// Whether the daemon was last asked to pause deliveries.
    private var pausedAtDaemon = false
    /// Whether the channel reads (NIO's `autoRead`).
    private(set) var isReading = true
    /// Whether it reads although a subscription is at its hard limit, for a reply someone waits for: what comes for
    /// such a subscription meanwhile is dropped and announced.
    @exclusivity(unchecked) private var isReadingPastLimit = false
    private var closedByUser = false
    /// The fire-and-forget publishes waiting to go out; written before any other request, so that all go in call
    /// order.
    var outbox: PublishOutbox?
    /// What the outbox still held when the connection was lost, for the client to send on its next connection.
    private var leftoverPublishes: ByteBuffer?
    /// The local subscriptions each recent topic goes to (see ``subscriptions(matching:)``); emptied whenever the
    /// subscriptions change.
    @exclusivity(unchecked) private var routeCache: [Topic: [LocalSubscription]] = [:]
    /// The last topic routed and where it went: a topic's messages usually come in runs, and the decoder hands the
    /// same string again for the same topic, so telling it is the same costs no hashing.
    @exclusivity(unchecked) private var lastRoute: (topic: Topic, subscriptions: [LocalSubscription])?
    /// Whether a read of the socket is under way: events given meanwhile are handed over at its end, together.
    @exclusivity(unchecked) private var inRead = false
    /// The subscriptions given events in the read under way.
    @exclusivity(unchecked) private var handOvers: [LocalSubscription] = []
    private var greeted = false
    private var failure: NotifyClientError?
    /// An `ERR storage` without a request id: if the daemon closes the connection next, the reason it did.
    private var closingReason: ProtocolError?

    init(greeting: EventLoopPromise<ServerGreeting>) {
        self.greeting = greeting
    }

    /// Completes with the daemon's greeting, the first frame it sends.
    var greetingFuture: EventLoopFuture<ServerGreeting> { greeting.futureResult }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    // MARK: - Sending

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
        for publish in acknowledged { waiting[publish.id] = .continuation(publish.reply) }
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
    private func updateFlow() {
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

    // MARK: - Receiving

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        if var pending = unread.take() {
            pending.writeBuffer(&buffer)
            buffer = pending
        }
        inRead = true
        do {
            while let frame = try decoder.decode(buffer: &buffer) { take(frame) }
        } catch {
            errorCaught(context: context, error: error)
            return
        }
        guard buffer.readableBytes > 0 else { return }
        guard buffer.readableBytes <= largestFrame else {
            let reason = "a frame of more than \(largestFrame) bytes, larger than any a daemon sends"
            errorCaught(context: context, error: ServerFrameDecoder.Malformed(reason: reason))
            return
        }
        // A few bytes of a frame would keep a whole receive buffer (and every payload sliced from it) alive: copied
        // out, unless most of the buffer is that one frame.
        if buffer.readableBytes < buffer.capacity / 2 {
            var copy = context.channel.allocator.buffer(capacity: max(buffer.readableBytes, 256))
            copy.writeBuffer(&buffer)
            unread = copy
        } else {
            unread = buffer
        }
    }

    /// Takes one frame from the daemon. A delivery, the common frame, is moved to its route rather than copied
    /// through the switch of ``receive(_:)``.
    private func take(_ frame: consuming ServerFrame) {
        switch consume frame {
        case .delivery(let delivery): route(delivery)
        case let other: receive(other)
        }
    }

    /// Takes one frame from the daemon: a reply goes to the request waiting for it, a delivery to the local
    /// subscriptions it is for.
    private func receive(_ frame: ServerFrame) {
        switch frame {
        case .hello(let serverGreeting):
            greeted = true
            daemonPauses = serverGreeting.version >= ServerGreeting.pausingVersion
            greeting.succeed(serverGreeting)
        case .delivery(let delivery):
            route(delivery)
        case .dropped(let notice) where notice.isAboutManyTopics:
            // Of topics it does not name: any subscription may have missed some.
            for subscription in subscriptions.values { hand(notice, to: subscription) }
        case .dropped(let notice):
            route(notice)
        case .missed(let id, let notice):
            // What a resuming subscription's history no longer holds: for the subscription that asked.
            if let target = replayTargets[id], let subscription = subscriptions[target] { hand(notice, to: subscription) }
        case .error(let error) where !greeted:
            // A daemon at a connection limit answers with an `ERR` instead of its greeting, then closes.
            failure = NotifyClientError.refused(error)
            greeting.fail(NotifyClientError.refused(error))
        case .error(let error) where error.requestID.map { collections[$0] != nil } ?? false:
            collections.removeValue(forKey: error.requestID!)!.promise.fail(NotifyClientError.refused(error))
        case .latest(let id?, let delivery) where collections[id] != nil:
            collections[id]!.deliveries.append(delivery)
        case .ok(let id?, _) where collections[id] != nil:
            let collection = collections.removeValue(forKey: id)!
            collection.promise.succeed(collection.deliveries)
        case .error(let error):
            if let id = error.requestID { replaysAnswered(id) }
            if let id = error.requestID, let waiter = waiting.removeValue(forKey: id) {
                waiter.succeed(.error(error))
            } else if error.requestID == nil && error.code == .unavailable {
                // The daemon is going away and closing the connection: say why when the connection ends, rather
                // than just "closed".
                failure = failure ?? NotifyClientError(.connectionClosed, error.message, refusal: error)
            } else if error.requestID == nil && error.code == .storage {
                // Either a fire-and-forget publish refused (its frame has no id), for the next flush, or the daemon
                // withdrawing acknowledgements its state log could not back before it closes the connection: then
                // this is why it closed.
                deferredErrors.append(error)
                closingReason = error
            } else {
                deferredErrors.append(error)
            }
        case .latest(let id?, let delivery) where replayTargets[id] != nil:
            // A buffered message brought by `SUB … latest`: for the subscription that asked, not a reply.
            if let subscription = subscriptions[replayTargets[id]!], !subscription.isRepeat(delivery) {
                hand(delivery, to: subscription)
            }
        case .ok(let id, _), .pong(let id), .latest(let id, _), .topics(let id, _), .stats(let id, _), .explanation(let id, _):
            // A reply after an `ERR storage`: the connection went on, so that error was a refusal, not why it ends.
            // (Deliveries prove nothing: the daemon may still send some before it closes.)
            closingReason = nil
            if let id { replaysAnswered(id) }
            if let id, let waiter = waiting.removeValue(forKey: id) { waiter.succeed(frame) }
        }
    }

    /// Hands `event` to every local subscription with a pattern matching `topic`, once each, leaving out a message
    /// a subscription already has.
    private func route(_ delivery: Delivery) {
        for subscription in subscriptions(matching: delivery.topic) {
            if subscription.awaitsHistory(of: delivery.topic) || subscription.isRepeat(delivery) { continue }
            hand(delivery, to: subscription)
        }
    }

    /// Hands `notice` to every local subscription with a pattern matching its topic, once each.
    private func route(_ notice: DropNotice) {
        for subscription in subscriptions(matching: notice.topic) { hand(notice, to: subscription) }
    }

    /// The local subscriptions whose patterns match `topic`, each once: looked up in the patterns once per topic
    /// (a topic's messages usually come in runs), then remembered until the subscriptions change.
    private func subscriptions(matching topic: Topic) -> [LocalSubscription] {
        if let last = lastRoute, last.topic == topic { return last.subscriptions }
        let matched: [LocalSubscription]
        if let known = routeCache[topic] {
            matched = known
        } else {
            var ids: [UInt64] = []
            routes.forEachMatch(of: topic) { id in
                if !ids.contains(id) { ids.append(id) }
            }
            matched = ids.compactMap { subscriptions[$0] }
            if routeCache.count >= Self.routeCacheSize { routeCache.removeAll(keepingCapacity: true) }
            routeCache[topic] = matched
        }
        lastRoute = (topic, matched)
        return matched
    }

    /// Forgets where topics went, when the subscriptions change.
    private func forgetRoutes() {
        routeCache.removeAll()
        lastRoute = nil
    }

    /// How many topics' subscriptions are remembered at most (``subscriptions(matching:)``).
    static let routeCacheSize = 4_096

    /// Gives `delivery` to `subscription`'s consumer, counting it in what the subscription holds; or, while the
    /// connection reads past the subscription's hard limit, drops it, to be announced.
    private func hand(_ delivery: Delivery, to subscription: LocalSubscription) {
        guard subscription.isNewAcrossConnections(delivery) else { return }
        if isReadingPastLimit && isDroppingLocally(for: subscription) {
            subscription.localDrops.record(delivery.topic, count: 1, first: delivery.sequence, last: delivery.sequence)
            return
        }
        if !subscription.localDrops.isEmpty { announceLocalDrops(of: subscription) }
        give(.message(delivery), to: subscription)
    }

    /// Gives `notice` to `subscription`'s consumer, less what it already has, as a message is given.
    private func hand(_ notice: DropNotice, to subscription: LocalSubscription) {
        guard let notice = subscription.missedAcrossConnections(notice) else { return }
        if isReadingPastLimit && isDroppingLocally(for: subscription) {
            subscription.localDrops.record(notice)
            return
        }
        if !subscription.localDrops.isEmpty { announceLocalDrops(of: subscription) }
        give(.dropped(notice), to: subscription)
    }

    /// Whether what comes for `subscription` while the connection reads past its hard limit is dropped here.
    private func isDroppingLocally(for subscription: LocalSubscription) -> Bool {
        fullSubscriptions.contains(subscription.id) && subscription.gauge.isAtHardLimit
    }

    /// Gives `event` to `subscription`'s consumer, counting it, and holding back the connection when that fills
    /// the subscription.
    private func give(_ event: SubscriptionEvent, to subscription: LocalSubscription) {
        let size = event.bufferedSize
        switch subscription.gauge.add(size) {
        case .roomy, .full:
            break
        case .becameFull:
            fullSubscriptions.insert(subscription.id)
            // At once rather than at the end of the read: the sooner the daemon pauses, the less it sends meanwhile.
            updateFlow()
        case .atHardLimit:
            if isReading { updateFlow() }
        }
        if case .sink(let yield, _) = subscription.output {
            yield(event)
            return
        }
        subscription.gathered.events.append(event)
        subscription.gathered.bytes += size
        if !inRead {
            handGathered(to: subscription)
        } else if !subscription.awaitsHandOver {
            subscription.awaitsHandOver = true
            handOvers.append(subscription)
        }
    }

    /// Hands each subscription what the read brought it.
    private func handOverReadEvents() {
        inRead = false
        guard !handOvers.isEmpty else { return }
        for subscription in handOvers { handGathered(to: subscription) }
        handOvers.removeAll(keepingCapacity: true)
    }

    /// Hands `subscription`'s consumer what it was given since the last time.
    private func handGathered(to subscription: LocalSubscription) {
        subscription.awaitsHandOver = false
        guard !subscription.gathered.events.isEmpty else { return }
        let batch = subscription.gathered
        subscription.gathered = SubscriptionInbox.Batch()
        // Only an inbox gathers (a sink takes each event at once).
        if case .inbox(let inbox) = subscription.output { inbox.append(batch) }
    }

    /// Ends `subscription` for its consumer, after what it was given: with nil when it ends normally, else with why.
    private func finish(_ subscription: LocalSubscription, _ error: (any Error)?) {
        handGathered(to: subscription)
        subscription.output.finish(error)
    }

    /// Hands subscription `id` the notices of what it dropped itself, if it did: all of them, its hard limit
    /// notwithstanding (they are a few, at most ``DropTally/topicLimit`` and one), so that none comes after a
    /// message newer than what it tells of.
    private func announceLocalDrops(of subscription: LocalSubscription) {
        guard !subscription.localDrops.isEmpty else { return }
        for notice in subscription.localDrops.take() { give(.dropped(notice), to: subscription) }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        handOverReadEvents()
        updateFlow()
        context.fireChannelReadComplete()
    }

    /// Notes that the `SUB … latest` with request `id`, if it was one, has its reply: its buffered messages are all
    /// in. Once a subscription has all of its replies, nothing can repeat any more, and it stops keeping count.
    private func replaysAnswered(_ id: UInt64) {
        guard let subscription = replayTargets.removeValue(forKey: id) else { return }
        if let pattern = historyReplayPatterns.removeValue(forKey: id), let count = subscriptions[subscription]?.historyReplays[pattern] {
            subscriptions[subscription]!.historyReplays[pattern] = count > 1 ? count - 1 : nil
        }
        subscriptions[subscription]?.replaysPending -= 1
        if subscriptions[subscription]?.replaysPending == 0 { subscriptions[subscription]?.replayed = DeliveredMessages() }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if failure == nil {
            if let malformed = error as? ServerFrameDecoder.Malformed {
                failure = NotifyClientError(.protocolViolation, malformed.description)
            } else if let truncated = error as? ServerFrameDecoder.Truncated {
                failure = NotifyClientError(.connectionClosed, truncated.description)
            } else {
                failure = NotifyClientError(.connectionClosed, "the connection to the daemon failed: \(error)")
            }
        }
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        if var rest = unread.take(), failure == nil {
            do {
                while let frame = try decoder.decodeLast(buffer: &rest, seenEOF: true) { take(frame) }
            } catch {
                errorCaught(context: context, error: error)
            }
        }
        handOverReadEvents()
        let error =
            failure
            ?? closingReason.map { NotifyClientError(.connectionClosed, $0.message, refusal: $0) }
            ?? NotifyClientError(
                .connectionClosed,
                closedByUser
                    ? "the connection was closed"
                    : "the daemon closed the connection: it stopped, or closed a subscriber that fell behind with overflow=disconnect"
            )
        failure = error
        leftoverPublishes = outbox?.close(error)
        greeting.fail(error)
        for waiter in waiting.values { waiter.fail(error) }
        waiting.removeAll()
        for collection in collections.values { collection.promise.fail(error) }
        collections.removeAll()
        var resumable: [LocalSubscription] = []
        for subscription in subscriptions.values {
            if closedByUser {
                finish(subscription, nil)
            } else if handOver != nil, let resume = subscription.resume, error.kind == .connectionClosed,
                // Under `disconnect`, a connection closed without the daemon saying it goes away is this subscriber's
                // own end for falling behind, which it asked for.
                resume.overflow != .disconnect || error.refusal?.code == .unavailable
            {
                resumable.append(subscription)
            } else {
                finish(subscription, error)
            }
        }
        subscriptions.removeAll()
        if !resumable.isEmpty { handOver?(resumable, error) }
        self.context = nil
        context.fireChannelInactive()
    }
}
