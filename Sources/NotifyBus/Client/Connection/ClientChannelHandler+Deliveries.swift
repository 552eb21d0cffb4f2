import NIOCore
import NotifyProtocol

/// What the daemon sends, read: replies matched to the requests waiting for them, deliveries and drop notices
/// routed to the local subscriptions whose patterns match, within each subscription's buffer limits.
extension ClientChannelHandler {
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
        // Bounded by the decoder (it refuses a frame larger than any the daemon sends).
        unread = buffer.keptForNextRead(allocator: context.channel.allocator)
    }

    /// Takes one frame from the daemon. A delivery, the common frame, is moved to its route rather than copied
    /// through the switch of ``receive(_:)``.
    func take(_ frame: consuming ServerFrame) {
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
        case .export:
            // Only a connection that sent `FOLLOW` gets them: the fleet service's, which does not use this client.
            break
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
    func forgetRoutes() {
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
    func handOverReadEvents() {
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
    func finish(_ subscription: LocalSubscription, _ error: (any Error)?) {
        handGathered(to: subscription)
        subscription.output.finish(error)
    }

    /// Hands subscription `id` the notices of what it dropped itself, if it did: all of them, its hard limit
    /// notwithstanding (they are a few, at most ``DropTally/topicLimit`` and one), so that none comes after a
    /// message newer than what it tells of.
    func announceLocalDrops(of subscription: LocalSubscription) {
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
}
