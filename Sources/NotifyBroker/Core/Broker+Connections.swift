internal import DequeModule
import NIOCore
public import NotifyProtocol

/// Connections as they come and go, and what each user (uid) holds through them: the limits on connections, the
/// budget of unfinished requests, and shutting down.
extension Broker {
    /// Registers a new connection and queues the greeting to it; or, past a connection limit, an `ERR limit`
    /// instead of the greeting, and the connection is closed at the next ``flush()``.
    public func open(peer: PeerCredentials, transport: any SessionTransport) -> Session {
        let session = connections.register(peer: peer, transport: transport)
        let account = session.account
        counters.connections += 1
        counters.connectionsTotal += 1
        if let refusal = connectionRefusal(ofUser: account.connections, uid: peer.uid) {
            refuse(refusal, subject: nil, to: session)
            session.closesAfterFlush = true
        } else {
            queue(greeting, to: session)
        }
        return session
    }

    /// Why a connection that makes `counters.connections` in total and `ofUser` for `uid` is refused, if it is.
    func connectionRefusal(ofUser: Int, uid: UInt32) -> ProtocolError? {
        if counters.connections > configuration.maxConnections {
            let sentence = "the daemon already serves \(configuration.maxConnections) connections (its limit); try again later"
            return ProtocolError(.limitReached, sentence)
        }
        if ofUser > configuration.maxConnectionsPerUser {
            let sentence = "uid \(uid) already has \(configuration.maxConnectionsPerUser) connections open (the limit per user);"
                + " close some, or reuse one connection for many requests"
            return ProtocolError(.limitReached, sentence)
        }
        return nil
    }

    /// Forgets a connection that is gone: its subscriptions end, and nothing more is sent to it. Publishes and
    /// clears it sent that were held back are carried out first (a client that wrote and left still published
    /// what it wrote); its other requests only asked for answers, and nobody is left to read them.
    public func close(_ session: Session) {
        guard !session.isClosed else { return }
        if session.isHoldingBack {
            session.detachTransport()
            while let held = session.heldBack.popFirst() {
                guard case .request(let request) = held else { continue }
                switch request.command {
                case .publish, .clear: carryOut(held, from: session)
                default: continue
                }
            }
        }
        forget(session)
    }

    /// Lets go of a session once what it held back is dealt with: its subscriptions, its account's share, its place
    /// among the open sessions.
    func forget(_ session: Session) {
        guard !session.isClosed else { return }
        session.heldBack.removeAll()
        session.markClosed()
        fleetSessionClosed(session)
        counters.connections -= 1
        connections.unregister(session)
        session.subscriptions.removeAll { subscription in
            routing.remove(subscription)
            subscriptionsChanged(for: subscription.pattern)
            session.account.subscriptions -= 1
            session.account.wildcardTokens -= Self.wildcardTokens(of: subscription.pattern)
        }
        // What waited for it, and what it had sent unfinished, are let go with it.
        discardOutbox(of: session)
        chargeWriteBuffer(of: session, 0)
        _ = holdUnread(0, for: session)
        session.account.connections -= 1
        forgetIfEmpty(session.account)
    }

    /// Lets go of what the broker keeps only to go faster or because a burst made it: subscriber lists made stale by
    /// changes to wildcard subscriptions (``SubscriberRouting/releaseStaleLists(in:)``), and the queues of connections that fell
    /// behind and caught up since (a queue keeps the room its longest backlog took, megabytes for a subscriber that
    /// once fell 100,000 messages behind). Walks every topic and connection: the daemon calls it when it has been
    /// idle for a while, before it gives freed memory back to the system.
    public func releaseIdleMemory() {
        routing.releaseStaleLists(in: topicTable)
        historyLedger.shareOrder(ifAllKeptByOneOf: connections.accounts.values)
        // What grew with a burst of connections or messages keeps its room while the daemon works; once idle, that
        // room is let go, or the few blocks it holds pin pages of the heap that the burst spread them over.
        if pendingHistory.isEmpty { pendingHistory.releaseCapacity() }
        if sessionsToFlush.isEmpty { sessionsToFlush = [] }
        connections.releaseIdleCapacity()
        for session in connections.open {
            if session.hasOutboxStorage, session.outboxIsEmpty { session.releaseOutbox() }
        }
    }

    /// The account of `uid`, made if it holds nothing yet.
    func account(of uid: UInt32) -> UserAccount { connections.account(of: uid) }

    /// The account a restored message is charged to: its publisher's uid for one published here; for another
    /// host's, ``ImportedMessage/importerUID``, as while running (the uid it claims is that host's, and only a claim).
    func account(charging publisher: Publisher) -> UserAccount {
        account(of: publisher.host == nil ? publisher.uid : ImportedMessage.importerUID)
    }

    func forgetIfEmpty(_ account: UserAccount) {
        guard account.isEmpty, connections.accounts[account.uid] === account else { return }
        // Messages of this batch on their way into histories may be its own: once in, they are what it holds.
        settleHistory()
        connections.forgetIfEmpty(account)
    }

    /// Counts `bytes` read from `session` and not carried out yet (what its connection keeps of an unfinished
    /// frame) against its uid's budget and the daemon's.
    /// - Returns: false when that goes over either; the session is then sent `ERR limit` and closed at the flush,
    ///   and the caller drops what it kept.
    public func holdUnread(_ bytes: Int, for session: Session) -> Bool {
        // A closed session gave its share back already; a closing one keeps nothing (its connection may still be
        // read from while it closes, and nothing would give those bytes back).
        guard !session.isClosed else { return false }
        let closing = session.closesAfterFlush
        let kept = closing ? 0 : bytes
        let delta = connections.holdUnread(kept, for: session)
        if closing { return false }
        guard delta > 0 else { return true }
        let overUser = session.account.unreadBytes > configuration.maxUnreadBytesPerUser
        guard overUser || connections.unreadBytesTotal > configuration.maxUnreadBytesTotal else { return true }
        let whose = overUser ? "uid \(session.peer.uid)'s connections" : "all connections"
        let limit = overUser ? configuration.maxUnreadBytesPerUser : configuration.maxUnreadBytesTotal
        end(session, with: ProtocolError(
            .limitReached,
            "\(whose) hold \(limit) bytes of requests not finished yet (the limit); this connection is closed: send each"
                + " request whole, or use fewer connections at once"
        ))
        _ = holdUnread(0, for: session)  // closing now: gives its share back
        return false
    }

    /// Sends `error` to the session and closes its connection at the flush: for what makes the daemon give up on a
    /// connection (an unfinished frame that waits too long, or too many unfinished bytes).
    public func end(_ session: Session, with error: ProtocolError) {
        guard !session.isClosed, !session.closesAfterFlush else { return }
        refuse(error, subject: nil, to: session)
        session.closesAfterFlush = true
    }

    /// Closes the subscribers disconnected during the batch, outside any fan-out: their connections are aborted, and
    /// what they had sent and was not carried out yet (held back here, or still in their handler) is published now.
    func closeDisconnected() {
        while !disconnecting.isEmpty {
            let sessions = disconnecting
            disconnecting.removeAll()
            for (session, transport) in sessions {
                // The connection first: closing it hands over what it read and did not carry out yet (its handler
                // passes those publishes on, behind the ones held back here); then the session, if that did not.
                transport.abort()
                close(session)
            }
        }
    }

    /// Ends every connection for shutdown: each one is sent what is queued for it and an `ERR unavailable`, then
    /// closed.
    public func shutdown() {
        finishSyncs()
        for session in connections.open {
            // What is queued goes out as far as the connection takes it; the transport's close gives it a while.
            writeSpan(of: session)
            if let transport = session.transport, session.hasOutboxStorage {
                // What flowed past paused deliveries goes first, as it would have.
                if session.pausesDeliveries { _ = changingOutbox(of: session) { $0.drainFlowing(into: transport) } }
                if !session.outboxHasFlowingEntries || !session.pausesDeliveries {
                    _ = changingOutbox(of: session) { $0.drain(into: transport) }
                }
            }
            reply(ProtocolError(.unavailable, "the daemon is shutting down; reconnect once it is back"), to: session)
            session.closesAfterFlush = true
        }
        flush()
    }
}
