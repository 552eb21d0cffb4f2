import NIOCore
import NotifyProtocol

/// Subscribing and unsubscribing: the subscription index and each topic's cached subscriber list kept in step, and
/// the buffered messages a `SUB … latest` replays before its `OK`.
extension Broker {
    /// Invalidates the cached subscriber lists that a change to `pattern` may have made wrong.
    func subscriptionsChanged(for pattern: TopicPattern) {
        // A topic named exactly may have lost its last subscriber by name: it may be forgotten again.
        if let state = routing.patternChanged(pattern, in: topicTable), !state.hasRetained { topicTable.listForgettable(state) }
    }

    func subscribe(_ session: Session, to pattern: TopicPattern, options: SubscribeOptions, id: UInt64?) {
        // A topic named exactly is refused when it may not be read; a wildcard only never delivers such topics.
        if pattern.isLiteral, let topic = try? Topic(pattern.text), let denial = denial(.read, of: topic, to: session, id: id) {
            return refuse(denial, subject: pattern.text, to: session)
        }
        if let existing = session.subscriptions[pattern] {
            if existing.overflow != options.overflow {
                existing.overflow = options.overflow
                subscriptionsChanged(for: pattern)
            }
        } else {
            guard session.subscriptions.count < configuration.maxSubscriptionsPerConnection else {
                let sentence = "this connection already holds \(configuration.maxSubscriptionsPerConnection) subscriptions"
                    + " (the limit per connection); unsubscribe from some, or use a wildcard pattern"
                return refuse(ProtocolError(.limitReached, sentence, requestID: id), subject: pattern.text, to: session)
            }
            guard session.account.subscriptions < configuration.maxSubscriptionsPerUser else {
                let sentence = "uid \(session.peer.uid) already holds \(configuration.maxSubscriptionsPerUser) subscriptions"
                    + " over its connections (the limit per user); unsubscribe from some, or use a wildcard pattern"
                return refuse(ProtocolError(.limitReached, sentence, requestID: id), subject: pattern.text, to: session)
            }
            let tokens = Self.wildcardTokens(of: pattern)
            guard tokens <= configuration.maxWildcardTokens else {
                let sentence = "a pattern with a wildcard may have at most \(configuration.maxWildcardTokens) tokens, and this one"
                    + " has \(tokens); subscribe to a shorter one (a final > matches any number of tokens)"
                return refuse(ProtocolError(.limitReached, sentence, requestID: id), subject: pattern.text, to: session)
            }
            guard session.account.wildcardTokens + tokens <= configuration.maxWildcardTokensPerUser else {
                let sentence = "uid \(session.peer.uid) already subscribes to wildcard patterns of"
                    + " \(configuration.maxWildcardTokensPerUser) tokens in all (the limit per user); unsubscribe from some"
                return refuse(ProtocolError(.limitReached, sentence, requestID: id), subject: pattern.text, to: session)
            }
            let subscription = Subscription(session: session, pattern: pattern, overflow: options.overflow)
            session.account.subscriptions += 1
            session.account.wildcardTokens += tokens
            session.subscriptions.insert(subscription)
            routing.insert(subscription)
            subscriptionsChanged(for: pattern)
        }
        if let since = options.since {
            replayHistory(matching: pattern, since: since, id: id, to: SubscriberTarget(session: session, overflow: options.overflow))
        } else if options.latestFirst {
            // Nothing runs between these writes and the OK, so the next live message follows without a gap.
            let target = SubscriberTarget(session: session, overflow: options.overflow)
            forEachRetained(matching: pattern) { state, retained in
                guard configuration.accessPolicy.allows(.read, topic: state.topic, peer: session.peer) else { return }
                // A `LAST` with the SUB's id, not the `MSG` itself: a client with several subscriptions hands it only
                // to the one that asked (a live `MSG` is for every one that matches).
                // One frame: a delivery may have to wait in the subscriber's queue, which takes whole frames.
                let frame = retained.withFrame { lastFrame(id: id, messageFrame: $0) }
                replay(frame, of: state, sequence: retained.sequence, payloadSize: retained.payloadSize, to: target)
            }
        }
        // The OK ends the buffered messages for the client, and comes after them: like them, it flows while the
        // connection's live deliveries are paused.
        replyOK(id, to: session)
    }

    /// A `LAST` frame (the reply to `LATEST` and `HISTORY`, and what `SUB … latest` sends) with request id `id`,
    /// made from a `MSG` frame: the same frame with the request id and another verb, in a buffer of its own (the
    /// frame's may take other bytes meanwhile).
    func lastFrame(id: UInt64?, messageFrame frame: UnsafeRawBufferPointer) -> ByteBuffer {
        let verbLength = 3  // "MSG"
        var last = allocator.buffer(capacity: 28 + frame.count)
        last.writeRequestID(id)
        last.writeStaticString("LAST")
        last.writeBytes(UnsafeRawBufferPointer(rebasing: frame[verbLength...]))
        return last
    }

    func unsubscribe(_ session: Session, from pattern: TopicPattern, id: UInt64?) {
        guard let subscription = session.subscriptions.remove(pattern) else {
            let sentence = "this connection has no subscription to \"\(pattern.text)\"; UNSUB takes the pattern exactly as it was subscribed"
            return reply(ProtocolError(.notFound, sentence, requestID: id), to: session)
        }
        routing.remove(subscription)
        subscriptionsChanged(for: pattern)
        session.account.subscriptions -= 1
        session.account.wildcardTokens -= Self.wildcardTokens(of: pattern)
        replyOK(id, to: session)
    }

    /// The tokens a pattern costs in the subscription index's trie: none for one without wildcards (a hash entry).
    static func wildcardTokens(of pattern: TopicPattern) -> Int {
        guard !pattern.isLiteral else { return 0 }
        return pattern.text.utf8.reduce(1) { $1 == TopicSyntax.dot ? $0 + 1 : $0 }
    }

    func forEachRetained(matching pattern: TopicPattern, _ body: (TopicState, BufferedMessage) -> Void) {
        if pattern.isLiteral {
            if let state = topicTable[pattern.text], let retained = retained(of: state) { body(state, retained) }
            return
        }
        workDone &+= topicTable.forEach(matching: pattern) { state in
            if let retained = retained(of: state) { body(state, retained) }
        }
    }
}
