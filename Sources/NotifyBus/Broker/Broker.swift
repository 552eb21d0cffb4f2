internal import DequeModule
import NIOCore

/// The heart of notifyd: topics, subscriptions, buffered latest messages, sequence numbers and fan-out, without
/// any I/O. The daemon feeds it decoded requests and gives it a ``SessionTransport`` per connection; tests do the
/// same with buffers.
///
/// ## Threading
/// A broker and its sessions belong to one thread (the daemon's single event loop). No method is thread-safe, and
/// none needs a lock: that is what keeps the per-message path short.
///
/// ## Data structures
/// - `topics`: topic name -> `TopicState` (sequence, buffered message, counters, cached subscriber list).
/// - `index`: pattern -> subscriptions (each knows its session and overflow policy), answering which sessions a
///   topic's messages go to.
/// - `Session.subscriptions`: session -> subscriptions, the other direction, kept in step with `index` by
///   `subscribe`, `unsubscribe` and `close` only.
/// - Each topic caches the sessions its messages go to, so a publish normally costs one hash lookup plus one write
///   per subscriber. A change to a literal subscription empties that one topic's cache at once; a change to a
///   wildcard subscription bumps `wildcardGeneration`, and every cache is recomputed from `index` on its topic's
///   next publish. Closed sessions drop their transport, so a stale cache never keeps a connection alive.
///
/// ## Batching and slow subscribers
/// Frames are written to sessions as work is done and sent by ``flush()``, which the daemon calls once per batch of
/// reads: many deliveries to one subscriber cost one flush. A session whose socket cannot take more gets its frames
/// in its ``OutboundQueue`` instead, bounded by ``BrokerConfiguration/maxQueuedMessages`` and
/// ``BrokerConfiguration/maxQueuedBytes``; ``writabilityChanged(_:)`` drains it. So a subscriber that does not read
/// never holds up a publisher or another subscriber, and costs the daemon at most its bounds.
///
/// ## Persistence
/// With a ``StateLog`` attached, every buffered message and a ceiling of every topic's sequence number are
/// appended to it as they change, and the batch's records are written before the batch's replies are sent. A
/// sequence ceiling is written ahead in steps of ``sequenceReserve``, so messages that are not retained cost one
/// write per thousand; after a crash a topic continues above its ceiling (a gap, never a repeat), after a clean
/// ``saveState()`` exactly where it was.
public final class Broker {
    /// The limits enforced; see ``reconfigure(_:)``.
    @exclusivity(unchecked) public private(set) var configuration: BrokerConfiguration

    /// A uid's primary and supplementary groups, for `EXPLAIN` about another uid; without it such a uid is taken
    /// to have the gid of the same number and no supplementary groups.
    @exclusivity(unchecked) public var groupsOfUser: ((UInt32) -> (gid: UInt32, groups: [UInt32])?)?

    /// Called with events worth logging; the broker's thread calls it.
    @exclusivity(unchecked) public var onEvent: ((BrokerEvent) -> Void)?

    // The state touched per message is marked `@exclusivity(unchecked)` here, in `TopicState` and in `Session`: all of
    // it is owned by the broker's one thread and never accessed overlapping, and the runtime's checks of class
    // properties cost a sixth of a publish (profiled with perf on 1→1 16-byte publishes).
    @exclusivity(unchecked) private var topics: [ByteKey: TopicState] = [:]
    /// Topics with no buffered message, oldest first: the ones forgotten when `maxTopics` is reached, unless someone
    /// subscribes to them by name. A topic is listed at most once (``TopicState/isListedForgettable``); one that gained a
    /// buffered message since is skipped, and listed again when cleared.
    @exclusivity(unchecked) private var forgettableTopics = Deque<ByteKey>()
    /// The topics again, grouped by first token, for the pattern lookups of `SUB … latest` and `TOPICS`.
    @exclusivity(unchecked) private var topicGroups = TopicGroups()
    private let index = SubscriptionIndex<Subscription>()
    @exclusivity(unchecked) private var wildcardGeneration: UInt64 = 0
    @exclusivity(unchecked) private var matchStamp: UInt64 = 0
    @exclusivity(unchecked) private var sessionsToFlush: [Session] = []
    private var openSessions: Set<Session> = []
    /// What each uid holds, for the limits per user; only uids that hold something are here.
    private var accounts: [UInt32: UserAccount] = [:]
    private var nextSessionID: UInt64 = 1
    private let clock: () -> PublishTime
    private let allocator = ByteBufferAllocator()
    private var greeting: ByteBuffer
    @exclusivity(unchecked) private var batch: DeliveryBatch
    /// Subscribers disconnected in this batch for falling behind under `disconnect`, with their connections: closed
    /// by ``flush()``, never in the middle of the fan-out that overflowed them. Closing a connection runs work of its
    /// own (its held-back publishes; the daemon's handler flushes), which must not run inside another publish.
    @exclusivity(unchecked) private var disconnecting: [(session: Session, transport: any SessionTransport)] = []

    @exclusivity(unchecked) private var counters: BrokerStatistics
    @exclusivity(unchecked) private var stateLog: StateLog?
    /// Set when a write to the state log failed: a flush rewrites the log from memory, not before
    /// `stateRetryTime` (backing off, so a full disk does not cost a full rewrite per batch).
    private var stateNeedsRewrite = false
    /// Why the state log cannot be written, while it cannot: retained publishes are refused meanwhile.
    public private(set) var stateProblem: String?
    private var stateRetryTime: UInt64 = 0
    private var stateRetryDelay: UInt64 = 0
    /// Bytes read from all connections and not carried out yet (see ``holdUnread(_:for:)``).
    @exclusivity(unchecked) private var unreadBytesTotal = 0
    /// Sessions whose acknowledgements wait for this batch's commit (see ``Session/awaitsCommit``).
    @exclusivity(unchecked) private var sessionsAwaitingCommit: [Session] = []
    /// Topics whose buffered message changed in this batch. Only their final state is logged, at the batch's end:
    /// a topic published to a thousand times in one read batch costs one record, not a thousand.
    @exclusivity(unchecked) private var unsavedTopics: [TopicState] = []
    /// The bytes of all buffered frames, to tell the state log how big a compacted copy would be.
    @exclusivity(unchecked) private var retainedFrameBytes = 0

    /// How far ahead of a topic's sequence number the state log's ceiling is written.
    public static let sequenceReserve = StateLog.sequenceReserve

    /// Work done since the broker started, in units of about one request: a request costs one, and one that walks
    /// the topic table one more per 64 topics it walks. The daemon reads a connection in turns of a fixed amount of
    /// it, so that one client's burst of costly requests does not keep everyone else (and the watchdog) waiting.
    @exclusivity(unchecked) public private(set) var workDone = 0

    /// The length of the list of topics it may forget, for tests: it stays within the number of topics.
    var forgettableTopicCount: Int { forgettableTopics.count }

    /// What the broker holds now and has done since it started.
    public var statistics: BrokerStatistics {
        var current = counters
        current.subscriptions = index.count
        current.topics = topics.count
        return current
    }

    /// Creates a broker.
    /// - Parameters:
    ///   - configuration: the limits to enforce.
    ///   - clock: the time stamped on publishes; tests pass their own.
    public init(configuration: BrokerConfiguration = .default, clock: @escaping () -> PublishTime = PublishTime.now) {
        self.configuration = configuration
        self.clock = clock
        self.counters = BrokerStatistics(startTime: clock())
        self.greeting = Broker.greeting(for: configuration)
        self.batch = DeliveryBatch(allocator: allocator)
    }

    /// Applies new limits: to new connections (the greeting and frame sizes they are told), and to what every
    /// connection asks from now on (subscriptions beyond a lowered limit are kept, new ones refused). A new access
    /// policy decides every operation from now on, deliveries to subscriptions already made included.
    public func reconfigure(_ configuration: BrokerConfiguration) {
        let policyChanged = configuration.accessPolicy != self.configuration.accessPolicy
        self.configuration = configuration
        greeting = Broker.greeting(for: configuration)
        // The cached subscriber lists were filtered by the old policy: subscriptions already made now deliver what
        // the new one lets them read, no more and no less; and what waits in the queues for a topic a connection may
        // no longer read is not sent either.
        if policyChanged {
            wildcardGeneration &+= 1
            let policy = configuration.accessPolicy
            for session in openSessions where !session.outbox.isEmpty {
                changingOutbox(of: session) { $0.removeDeliveries { !policy.allows(.read, topic: $0, peer: session.peer) } }
            }
        }
    }

    /// Counts a reload of the daemon's configuration once the daemon is done with it: applied, or refused because
    /// the file could not be used. Whoever asked for it learns from `STATS` that it is over, and how it went.
    public func recordReload(applied: Bool) {
        if applied { counters.reloads += 1 } else { counters.reloadsFailed += 1 }
    }

    private static func greeting(for configuration: BrokerConfiguration) -> ByteBuffer {
        var greeting = ByteBuffer()
        greeting.writeGreeting(ServerGreeting(limits: configuration.protocolLimits))
        return greeting
    }

    // MARK: - Persistence

    /// Restores the topics the log remembers and keeps the log up to date from now on. Call it once, before the
    /// first connection.
    public func attach(_ log: StateLog, restoring contents: StateLog.Contents) {
        var decoder = ServerFrameDecoder()
        for (name, record) in contents.topics {
            guard let topic = try? Topic(name) else { continue }
            let state = TopicState(topic: topic)
            state.sequence = record.sequence
            state.persistedSequence = record.sequence
            if let frame = record.retainedFrame {
                var input = frame
                if case .delivery(let delivery)? = try? decoder.decode(buffer: &input) {
                    let owner = account(of: delivery.publisher.uid)
                    owner.retainedBytes += delivery.payload.readableBytes
                    owner.retainedTopics += 1
                    state.retained = RetainedMessage(
                        frame: frame,
                        payloadSize: delivery.payload.readableBytes,
                        sequence: delivery.sequence,
                        owner: owner
                    )
                    state.lastPublished = delivery.time
                    counters.retainedTopics += 1
                    counters.retainedBytes += UInt64(delivery.payload.readableBytes)
                    retainedFrameBytes += frame.readableBytes
                }
            }
            let key = ByteKey(name)
            topics[key] = state
            topicGroups.add(state)
            if state.retained == nil { listForgettable(state, key) }
        }
        stateLog = log
    }

    /// Writes the exact state to the log, compacted: on a clean shutdown, so a restart continues without gaps.
    public func saveState() throws {
        guard let stateLog else { return }
        logUnsavedTopics(stateLog)
        try stateLog.commit()
        try compactState(stateLog)
    }

    /// Writes the batch's state records; runs before the batch's replies go out.
    /// - Returns: whether they are in the log (true without a log).
    private func commitState() -> Bool {
        guard let stateLog else { return true }
        let now = clock().microsecondsSinceEpoch
        do {
            if stateNeedsRewrite {
                guard now >= stateRetryTime else { return false }
                try compactState(stateLog)
                stateNeedsRewrite = false
                stateProblem = nil
                stateRetryDelay = 0
                onEvent?(.stateSavedAgain)
            } else {
                logUnsavedTopics(stateLog)
                try stateLog.commit()
                stateLog.setLiveSize(retainedFrameBytes + topics.count * 48)
                if stateLog.wantsCompaction { try compactState(stateLog) }
            }
            return true
        } catch {
            stateNeedsRewrite = true
            stateProblem = "\(error)"
            // From a tenth of a second up to half a minute between rewrites.
            stateRetryDelay = min(max(2 * stateRetryDelay, 100_000), 30_000_000)
            stateRetryTime = now + stateRetryDelay
            onEvent?(.stateNotSaved("\(error)"))
            return false
        }
    }

    /// Lets out the acknowledgements that waited for the commit, or, when it failed, withdraws them: what waited
    /// for such a session is dropped, and it is told why and closed, so that no `OK` stands for what is not in the
    /// log.
    private func settleAcknowledgements(committed: Bool) {
        guard !sessionsAwaitingCommit.isEmpty else { return }
        let sessions = sessionsAwaitingCommit
        sessionsAwaitingCommit.removeAll(keepingCapacity: true)
        for session in sessions {
            session.awaitsCommit = false
            guard let transport = session.transport else { continue }
            if committed {
                if transport.isWritable { drainOutbox(of: session, into: transport) }
                continue
            }
            changingOutbox(of: session) { $0 = OutboundQueue() }
            var error = allocator.buffer(capacity: 200)
            error.writeError(ProtocolError(
                .storage,
                "the daemon could not write its state log (\(stateProblem ?? "unknown")), so what it acknowledged on this"
                    + " connection in its last batch may not be saved; the connection is closed: check, and send again"
            ))
            transport.write(error)
            session.closesAfterFlush = true
            markForFlush(session)
        }
    }

    /// Holds what is sent to `session` from now on in this batch until the batch's records are in the log.
    private func awaitCommit(_ session: Session) {
        guard stateLog != nil, !session.awaitsCommit else { return }
        writeSpan(of: session)
        session.awaitsCommit = true
        sessionsAwaitingCommit.append(session)
    }

    /// Appends the final state of each topic whose buffered message changed since the last commit.
    private func logUnsavedTopics(_ log: StateLog) {
        for state in unsavedTopics {
            state.isUnsaved = false
            if let retained = state.retained {
                log.appendRetained(retained.frame)
            } else {
                log.appendCleared(state.topic.name)
            }
        }
        unsavedTopics.removeAll(keepingCapacity: true)
    }

    /// Notes that `state`'s buffered message changed, to be logged at the end of the batch.
    private func markUnsaved(_ state: TopicState) {
        guard stateLog != nil, !state.isUnsaved else { return }
        state.isUnsaved = true
        unsavedTopics.append(state)
    }

    private func compactState(_ log: StateLog) throws {
        for state in unsavedTopics { state.isUnsaved = false }
        unsavedTopics.removeAll(keepingCapacity: true)
        let records = topics.values.map { state in
            (state.topic.name, StateLog.TopicRecord(sequence: state.sequence, retainedFrame: state.retained?.frame))
        }
        try log.compact(records)
        for state in topics.values { state.persistedSequence = state.sequence }
    }

    // MARK: - Connections

    /// Registers a new connection and queues the greeting to it; or, past a connection limit, an `ERR limit`
    /// instead of the greeting, and the connection is closed at the next ``flush()``.
    public func open(peer: PeerCredentials, transport: any SessionTransport) -> Session {
        let account = account(of: peer.uid)
        let session = Session(id: nextSessionID, peer: peer, account: account, transport: transport)
        nextSessionID += 1
        counters.connections += 1
        counters.connectionsTotal += 1
        openSessions.insert(session)
        account.connections += 1
        if let refusal = connectionRefusal(ofUser: account.connections, uid: peer.uid) {
            refuse(refusal, subject: nil, to: session)
            session.closesAfterFlush = true
        } else {
            queue(greeting, to: session)
        }
        return session
    }

    /// Why a connection that makes `counters.connections` in total and `ofUser` for `uid` is refused, if it is.
    private func connectionRefusal(ofUser: Int, uid: UInt32) -> ProtocolError? {
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
    private func forget(_ session: Session) {
        guard !session.isClosed else { return }
        session.heldBack.removeAll()
        session.markClosed()
        counters.connections -= 1
        openSessions.remove(session)
        for subscription in session.subscriptions.values {
            index.remove(subscription, for: subscription.pattern)
            subscriptionsChanged(for: subscription.pattern)
        }
        session.account.subscriptions -= session.subscriptions.count
        for pattern in session.subscriptions.keys { session.account.wildcardTokens -= Self.wildcardTokens(of: pattern) }
        session.subscriptions.removeAll()
        // What waited for it, and what it had sent unfinished, are let go with it.
        changingOutbox(of: session) { $0 = OutboundQueue() }
        chargeWriteBuffer(of: session, 0)
        _ = holdUnread(0, for: session)
        session.account.connections -= 1
        forgetIfEmpty(session.account)
    }

    /// The account of `uid`, made if it holds nothing yet.
    private func account(of uid: UInt32) -> UserAccount {
        if let account = accounts[uid] { return account }
        let account = UserAccount(uid: uid)
        accounts[uid] = account
        return account
    }

    private func forgetIfEmpty(_ account: UserAccount) {
        if account.isEmpty && accounts[account.uid] === account { accounts[account.uid] = nil }
    }

    /// Sends every frame queued since the last flush, one flush per connection, and closes the connections that
    /// asked for it.
    public func flush() {
        closeDisconnected()
        settleAcknowledgements(committed: commitState())
        guard !sessionsToFlush.isEmpty else { return }
        // Every span goes out before any flush: a flush can make a connection writable again, and what that sets
        // off (a nested flush) starts a new batch.
        for session in sessionsToFlush { writeSpan(of: session) }
        if !batch.isEmpty { batch.restart(allocator: allocator) }
        let sessions = sessionsToFlush
        sessionsToFlush.removeAll(keepingCapacity: true)
        for session in sessions {
            session.hasUnflushedFrames = false
            if session.droppedSinceReport > 0 {
                onEvent?(.dropped(count: session.droppedSinceReport, for: session.peer))
                session.droppedSinceReport = 0
            }
            guard let transport = session.transport else { continue }
            transport.flush()
            chargeWriteBuffer(of: session, transport.bufferedBytes)
            if session.closesAfterFlush {
                transport.close()
                close(session)
            }
        }
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
        let delta = kept - session.unreadBytes
        session.unreadBytes = kept
        session.account.unreadBytes += delta
        unreadBytesTotal += delta
        if closing { return false }
        guard delta > 0 else { return true }
        let overUser = session.account.unreadBytes > configuration.maxUnreadBytesPerUser
        guard overUser || unreadBytesTotal > configuration.maxUnreadBytesTotal else { return true }
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
    private func closeDisconnected() {
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
        for session in openSessions {
            // What is queued goes out as far as the connection takes it; the transport's close gives it a while.
            writeSpan(of: session)
            if let transport = session.transport {
                // What flowed past paused deliveries goes first: a reply may be half out (a LAST header without its
                // body), and nothing may come between.
                if session.pausesDeliveries { _ = changingOutbox(of: session) { $0.drainFlowing(into: transport) } }
                if !session.outbox.hasFlowingEntries || !session.pausesDeliveries {
                    _ = changingOutbox(of: session) { $0.drain(into: transport) }
                }
            }
            reply(ProtocolError(.unavailable, "the daemon is shutting down; reconnect once it is back"), to: session)
            session.closesAfterFlush = true
        }
        flush()
    }

    /// Counts what the session's connection holds in its write buffer in its uid's queued bytes, and the daemon's,
    /// in place of what it held before.
    private func chargeWriteBuffer(of session: Session, _ bytes: Int) {
        let delta = bytes - session.writeBufferCharge
        guard delta != 0 else { return }
        session.writeBufferCharge = bytes
        session.account.queuedBytes += delta
        counters.queuedBytes += delta
    }

    /// Whether a connection that holds frames in its write buffer already must take no more there: its uid, or the
    /// daemon, has as many bytes waiting as its budget allows. Its deliveries then go to its queue, whose overflow
    /// policy makes room. A connection that takes all it is sent holds nothing there, and is never held up.
    private func writeBufferIsOverBudget(_ session: Session) -> Bool {
        session.writeBufferCharge > 0
            && (session.account.queuedBytes >= configuration.maxQueuedBytesPerUser || counters.queuedBytes >= configuration.maxQueuedBytesTotal)
    }

    /// Takes note that the session's connection took bytes from its write buffer without a flush (see
    /// ``SessionTransport/bufferedBytes``): they no longer count against its uid, and what waited in its queue for
    /// that room goes out.
    public func writeBufferChanged(_ session: Session) {
        guard let transport = session.transport else { return }
        chargeWriteBuffer(of: session, transport.bufferedBytes)
        writabilityChanged(session)
    }

    /// Drains a session's queue into its connection once the connection takes frames again, then carries out the
    /// requests held back meanwhile, for as long as it keeps taking their replies.
    public func writabilityChanged(_ session: Session) {
        guard let transport = session.transport, transport.isWritable else { return }
        writeSpan(of: session)
        drainOutbox(of: session, into: transport)
        while transport.isWritable, session.transport != nil, let request = session.heldBack.popFirst() {
            carryOut(request, from: session)
        }
    }

    /// Writes what the session's queue holds while its connection takes it: everything, or while its deliveries
    /// are paused, only the replies that may pass them.
    private func drainOutbox(of session: Session, into transport: any SessionTransport) {
        // Acknowledgements waiting for the batch's commit go out with everything behind them once it is done.
        guard !session.awaitsCommit else { return }
        let (messages, payloadBytes): (Int, Int)
        if session.pausesDeliveries {
            guard session.outbox.hasFlowingEntries else { return }
            (messages, payloadBytes) = changingOutbox(of: session) { $0.drainFlowing(into: transport) }
        } else {
            guard !session.outbox.isEmpty else { return }
            (messages, payloadBytes) = changingOutbox(of: session) { $0.drain(into: transport) }
        }
        counters.messagesOut += UInt64(messages)
        counters.bytesOut += UInt64(payloadBytes)
        markForFlush(session)
    }

    /// Changes the session's queue, and counts what that changed in the bytes queued for its uid and in total.
    private func changingOutbox<Result>(of session: Session, _ change: (inout OutboundQueue) -> Result) -> Result {
        let before = session.outbox.byteCount
        let result = change(&session.outbox)
        let delta = session.outbox.byteCount - before
        session.account.queuedBytes += delta
        counters.queuedBytes += delta
        return result
    }

    // MARK: - Requests

    /// Carries out one decoded frame from `session`, queuing its replies and deliveries; or, while its connection
    /// does not take replies, keeps it until ``writabilityChanged(_:)`` (see ``Session/isHoldingBack``).
    ///
    /// Holding back is what bounds a client that sends requests and never reads: its replies could be many times
    /// the size of its requests (a `TOPICS` is a few bytes, its answer may be megabytes).
    public func handle(_ decoded: DecodedRequest, from session: Session) {
        workDone &+= 1
        guard !session.isClosed, !session.closesAfterFlush else { return }
        if session.isHoldingBack || session.transport?.isWritable == false {
            session.heldBack.append(decoded)
            return
        }
        carryOut(decoded, from: session)
    }

    private func carryOut(_ decoded: DecodedRequest, from session: Session) {
        guard !session.isClosed, !session.closesAfterFlush else { return }
        switch decoded {
        case .request(let request):
            handle(request, from: session)
        case .failure(let error):
            refuse(error, subject: nil, to: session)
            if error.closesConnection { session.closesAfterFlush = true }
        }
    }

    private func handle(_ request: Request, from session: Session) {
        let id = request.id
        switch request.command {
        case .publish(let topic, let payload, let options):
            publish(topic, payload: payload, options: options, id: id, from: session)
        case .subscribe(let pattern, let options):
            subscribe(session, to: pattern, options: options, id: id)
        case .unsubscribe(let pattern):
            unsubscribe(session, from: pattern, id: id)
        case .latest(let topic):
            latest(topic, id: id, for: session)
        case .clear(let topic):
            clear(topic, id: id, for: session)
        case .topics(let pattern, let after):
            var reply = allocator.buffer(capacity: 64)
            reply.writeTopics(requestID: id, topicInfos(matching: pattern, after: after, readableBy: session.peer))
            queue(reply, to: session)
        case .stats:
            var reply = allocator.buffer(capacity: 256)
            reply.writeStats(requestID: id, statistics.counters(now: clock()))
            queue(reply, to: session)
        case .explain(let topic, let uid):
            explain(topic, uid: uid, id: id, for: session)
        case .ping:
            var reply = allocator.buffer(capacity: 32)
            reply.writePong(requestID: id)
            queue(reply, to: session)
        case .setEcho(let echo):
            session.receivesOwnMessages = echo
            replyOK(id, to: session)
        case .setDeliveriesPaused(let paused):
            session.pausesDeliveries = paused
            if !paused, let transport = session.transport, transport.isWritable {
                // What waited goes out before the OK, as it would have without the pause.
                writeSpan(of: session)
                drainOutbox(of: session, into: transport)
            }
            replyOK(id, to: session)
        }
    }

    // MARK: - Publish

    private func publish(_ topic: Topic, payload: ByteBuffer, options: PublishOptions, id: UInt64?, from session: Session) {
        if let denial = denial(.publish, of: topic, to: session, id: id) {
            return refuse(denial, subject: topic.name, to: session)
        }
        if options.retain, let refusal = retainRefusal(topic, payloadSize: payload.readableBytes, by: session.account) {
            return refuse(ProtocolError(.limitReached, refusal, requestID: id), subject: topic.name, to: session)
        }
        if options.retain, let refusal = storageRefusal(
            "it keeps no new buffered messages for now; publish without retaining (notify send --no-retain, noretain), or try again later",
            id: id
        ) {
            return refuse(refusal, subject: topic.name, to: session)
        }
        guard let state = topicState(for: topic) else {
            let sentence = "the daemon already tracks \(configuration.maxTopics) topics that all hold a buffered message or have subscribers by name"
                + " (its limit); clear some (notify clear, CLEAR), or publish to a topic it tracks without retaining"
                + " (notify send --no-retain, noretain)"
            return refuse(ProtocolError(.limitReached, sentence, requestID: id), subject: topic.name, to: session)
        }
        state.sequence += 1
        let time = clock()
        state.lastPublished = time
        state.published += 1
        counters.messagesIn += 1
        counters.bytesIn += UInt64(payload.readableBytes)

        // Encoded once, into the batch; every subscriber is handed the same bytes.
        // The encoder's own bound: a smaller guess would let the frame grow the buffer, copying the whole batch.
        let frameSize = ByteBuffer.maximumMessageFrameSize(
            topic: topic.name,
            unit: session.publisher.unit,
            payloadSize: payload.readableBytes
        )
        if !batch.hasRoom(for: frameSize) {
            for session in sessionsToFlush { writeSpan(of: session) }
            batch.restart(minimumCapacity: frameSize, allocator: allocator)
        }
        let sequence = state.sequence
        let frame = batch.append { buffer in
            buffer.writeMessageFrame(
                .delivery,
                requestID: nil,
                topic: topic.name,
                sequence: sequence,
                time: time,
                publisher: session.publisher,
                payload: payload
            )
        }

        for target in subscribers(of: state) where target.session !== session || session.receivesOwnMessages {
            deliver(frame, of: state, sequence: sequence, payloadSize: payload.readableBytes, to: target)
        }

        if options.retain {
            let owner = session.account
            if state.retained != nil {
                counters.retainedBytes -= UInt64(state.retained!.payloadSize)
                retainedFrameBytes -= state.retained!.frame.readableBytes
                let previousOwner = state.retained!.owner
                previousOwner.retainedBytes -= state.retained!.payloadSize
                if previousOwner !== owner {
                    state.retained!.owner = owner
                    previousOwner.retainedTopics -= 1
                    owner.retainedTopics += 1
                    forgetIfEmpty(previousOwner)
                }
                batch.copy(frame, replacing: &state.retained!.frame, allocator: allocator)
                state.retained!.payloadSize = payload.readableBytes
                state.retained!.sequence = sequence
            } else {
                counters.retainedTopics += 1
                owner.retainedTopics += 1
                let retained = batch.copy(frame, allocator: allocator)
                state.retained = RetainedMessage(frame: retained, payloadSize: payload.readableBytes, sequence: sequence, owner: owner)
            }
            owner.retainedBytes += payload.readableBytes
            counters.retainedBytes += UInt64(payload.readableBytes)
            retainedFrameBytes += frame.count
            if stateLog != nil {
                markUnsaved(state)
                state.persistedSequence = max(state.persistedSequence, state.sequence)
            }
        } else if let stateLog, state.sequence > state.persistedSequence {
            state.persistedSequence = state.sequence + Broker.sequenceReserve
            stateLog.appendSequence(topic.name, state.persistedSequence)
        }
        if options.acknowledge {
            // An OK means the message is where the README says: a retained one, with a log, in it. (One sent
            // without retaining is promised delivery only, which it had.)
            if options.retain { awaitCommit(session) }
            replyOK(id, value: state.sequence, to: session)
        }
    }

    /// The `ERR storage` for a change the state log must hold, while the log cannot be written: `consequence` says
    /// what that means for the request.
    private func storageRefusal(_ consequence: String, id: UInt64?) -> ProtocolError? {
        guard stateLog != nil, let stateProblem else { return nil }
        return ProtocolError(.storage, "the daemon cannot write its state log (\(stateProblem)), so \(consequence)", requestID: id)
    }

    /// Why buffering `payloadSize` bytes as `topic`'s latest message by `account` would break
    /// ``BrokerConfiguration/maxRetainedBytes``, ``BrokerConfiguration/maxRetainedBytesPerUser`` or
    /// ``BrokerConfiguration/maxRetainedTopicsPerUser``, if it would:
    /// such a publish is refused whole, so the publisher learns that it was not kept.
    private func retainRefusal(_ topic: Topic, payloadSize: Int, by account: UserAccount) -> String? {
        // Far from the limits, as usual, this costs no lookup of the topic.
        if counters.retainedBytes + UInt64(payloadSize) <= UInt64(configuration.maxRetainedBytes),
            account.retainedBytes + payloadSize <= configuration.maxRetainedBytesPerUser,
            account.retainedTopics < configuration.maxRetainedTopicsPerUser
        {
            return nil
        }
        let replaced = topics[ByteKey(topic.name)]?.retained
        if account.retainedTopics >= configuration.maxRetainedTopicsPerUser && replaced?.owner !== account {
            return "uid \(account.uid) already has buffered messages in \(configuration.maxRetainedTopicsPerUser) topics (the limit"
                + " per user); clear some of its topics (notify clear, CLEAR), or publish without retaining (notify send --no-retain, noretain)"
        }
        let after = counters.retainedBytes - UInt64(replaced?.payloadSize ?? 0) + UInt64(payloadSize)
        if after > UInt64(configuration.maxRetainedBytes) {
            return "buffering this \(payloadSize)-byte message would take the daemon past \(configuration.maxRetainedBytes) bytes"
                + " of buffered messages (its limit); clear some (notify clear, CLEAR), or publish without retaining (notify send --no-retain, noretain)"
        }
        let ownReplaced = replaced?.owner === account ? replaced?.payloadSize ?? 0 : 0
        if account.retainedBytes - ownReplaced + payloadSize > configuration.maxRetainedBytesPerUser {
            return "buffering this \(payloadSize)-byte message would take uid \(account.uid) past"
                + " \(configuration.maxRetainedBytesPerUser) bytes of buffered messages it published (the limit per user);"
                + " clear some of its topics (notify clear, CLEAR), or publish without retaining (notify send --no-retain, noretain)"
        }
        return nil
    }

    /// The state of `topic`, created if new; nil if the topic table is full of topics holding buffered messages.
    private func topicState(for topic: Topic) -> TopicState? {
        let key = ByteKey(topic.name)
        if let state = topics[key] { return state }
        while topics.count >= configuration.maxTopics {
            guard forgetATopic() else { return nil }
        }
        let state = TopicState(topic: topic)
        topics[key] = state
        topicGroups.add(state)
        listForgettable(state, key)
        return state
    }

    private func listForgettable(_ state: TopicState, _ key: ByteKey) {
        guard !state.isListedForgettable else { return }
        state.isListedForgettable = true
        forgettableTopics.append(key)
    }

    /// Forgets the oldest topic that buffers no message and that nobody subscribes to by name: its sequence number
    /// would start again at 1, which such a subscriber would take for a restart. (A wildcard subscription, `>` say,
    /// protects nothing: it would keep every topic.) Returns false when there is none. A topic passed over leaves
    /// the list, and comes back to it when it may be forgotten again (see ``subscriptionsChanged(for:)``).
    private func forgetATopic() -> Bool {
        while let key = forgettableTopics.popFirst() {
            workDone &+= 1
            guard let state = topics[key] else { continue }
            state.isListedForgettable = false
            guard state.retained == nil, !index.hasExactSubscribers(to: state.topic.name) else { continue }
            topics[key] = nil
            topicGroups.remove(state)
            return true
        }
        return false
    }

    /// The sessions that receive `state`'s messages, each once with its strictest overflow policy, recomputed only
    /// after subscriptions changed.
    private func subscribers(of state: TopicState) -> [SubscriberTarget] {
        if state.subscribersGeneration == wildcardGeneration { return state.subscribers }
        matchStamp &+= 1
        let stamp = matchStamp
        var list: [SubscriberTarget] = []
        let policy = configuration.accessPolicy
        index.forEachMatch(of: state.topic) { subscription in
            let session = subscription.session
            // A wildcard may match topics its connection may not read: they are never delivered to it.
            guard policy.allows(.read, topic: state.topic, peer: session.peer) else { return }
            if session.matchStamp != stamp {
                session.matchStamp = stamp
                session.matchPosition = list.count
                list.append(SubscriberTarget(session: session, overflow: subscription.overflow))
            } else {
                list[session.matchPosition].overflow = .strictest(list[session.matchPosition].overflow, subscription.overflow)
            }
        }
        state.subscribers = list
        state.subscribersGeneration = wildcardGeneration
        return list
    }

    /// Invalidates the cached subscriber lists that a change to `pattern` may have made wrong.
    private func subscriptionsChanged(for pattern: TopicPattern) {
        if pattern.isLiteral {
            let key = ByteKey(pattern.text)
            guard let state = topics[key] else { return }
            state.invalidateSubscribers()
            // Its last subscriber by name may be gone: it may be forgotten again.
            if state.retained == nil { listForgettable(state, key) }
        } else {
            wildcardGeneration &+= 1
        }
    }

    // MARK: - Subscriptions

    private func subscribe(_ session: Session, to pattern: TopicPattern, options: SubscribeOptions, id: UInt64?) {
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
            session.subscriptions[pattern] = subscription
            index.insert(subscription, for: pattern)
            subscriptionsChanged(for: pattern)
        }
        if options.latestFirst {
            // Nothing runs between these writes and the OK, so the next live message follows without a gap.
            let target = SubscriberTarget(session: session, overflow: options.overflow)
            forEachRetained(matching: pattern) { state, retained in
                guard configuration.accessPolicy.allows(.read, topic: state.topic, peer: session.peer) else { return }
                // A `LAST` with the SUB's id, not the `MSG` itself: a client with several subscriptions hands it only
                // to the one that asked (a live `MSG` is for every one that matches).
                // One frame: a delivery may have to wait in the subscriber's queue, which takes whole frames.
                let body = lastBody(of: retained)
                var frame = lastHeader(id: id, capacity: 28 + body.readableBytes)
                frame.writeImmutableBuffer(body)
                replay(frame, of: state, sequence: retained.sequence, payloadSize: retained.payloadSize, to: target)
            }
        }
        // The OK ends the buffered messages for the client, and comes after them: like them, it flows while the
        // connection's live deliveries are paused.
        replyOK(id, to: session)
    }

    /// A `LAST` frame (the reply to `LATEST`, and what `SUB … latest` sends) is the buffered `MSG` frame with the
    /// request id and another verb: this header, then ``lastBody(of:)``.
    private func lastHeader(id: UInt64?, capacity: Int = 28) -> ByteBuffer {
        var header = allocator.buffer(capacity: capacity)
        header.writeRequestID(id)
        header.writeStaticString("LAST")
        return header
    }

    /// The buffered `MSG` frame after its verb: a slice, so the payload is not copied.
    private func lastBody(of retained: RetainedMessage) -> ByteBuffer {
        let verbLength = 3  // "MSG"
        return retained.frame.getSlice(at: retained.frame.readerIndex + verbLength, length: retained.frame.readableBytes - verbLength)!
    }

    private func unsubscribe(_ session: Session, from pattern: TopicPattern, id: UInt64?) {
        guard let subscription = session.subscriptions.removeValue(forKey: pattern) else {
            let sentence = "this connection has no subscription to \"\(pattern.text)\"; UNSUB takes the pattern exactly as it was subscribed"
            return reply(ProtocolError(.notFound, sentence, requestID: id), to: session)
        }
        index.remove(subscription, for: pattern)
        subscriptionsChanged(for: pattern)
        session.account.subscriptions -= 1
        session.account.wildcardTokens -= Self.wildcardTokens(of: pattern)
        replyOK(id, to: session)
    }

    /// The tokens a pattern costs in the subscription index's trie: none for one without wildcards (a hash entry).
    private static func wildcardTokens(of pattern: TopicPattern) -> Int {
        guard !pattern.isLiteral else { return 0 }
        return pattern.text.utf8.reduce(1) { $1 == TopicSyntax.dot ? $0 + 1 : $0 }
    }

    private func forEachRetained(matching pattern: TopicPattern, _ body: (TopicState, RetainedMessage) -> Void) {
        if pattern.isLiteral {
            if let state = topics[ByteKey(pattern.text)], let retained = state.retained { body(state, retained) }
            return
        }
        forEachTopic(matching: pattern) { state in
            if let retained = state.retained { body(state, retained) }
        }
    }

    /// Calls `body` with each topic `pattern` matches (every topic for nil), walking only the group of its first
    /// token when that is literal (see ``TopicGroups``); the walk counts as work.
    private func forEachTopic(matching pattern: TopicPattern?, _ body: (TopicState) -> Void) {
        if let pattern, let group = topicGroups.candidates(for: pattern) {
            workDone &+= group.count / 64
            for state in group where pattern.matches(state.topic) { body(state) }
            return
        }
        workDone &+= topics.count / 64
        for state in topics.values where pattern?.matches(state.topic) ?? true { body(state) }
    }

    // MARK: - Latest and clear

    private func latest(_ topic: Topic, id: UInt64?, for session: Session) {
        if let denial = denial(.read, of: topic, to: session, id: id) {
            return refuse(denial, subject: topic.name, to: session)
        }
        guard let retained = topics[ByteKey(topic.name)]?.retained else {
            let sentence = "nothing is buffered for topic \"\(topic.name)\"; it has no messages yet, was cleared, or only got messages sent without retaining (--no-retain, noretain)"
            return reply(ProtocolError(.notFound, sentence, requestID: id), to: session)
        }
        // Two writes, and the payload is never copied: a `LATEST` of a 1 MiB message costs a 28-byte header.
        queue(lastHeader(id: id), to: session)
        queue(lastBody(of: retained), to: session)
    }

    private func clear(_ topic: Topic, id: UInt64?, for session: Session) {
        if let denial = denial(.publish, of: topic, to: session, id: id) {
            return refuse(denial, subject: topic.name, to: session)
        }
        if let refusal = storageRefusal("it cannot save a clear for now; try again later", id: id) {
            return refuse(refusal, subject: topic.name, to: session)
        }
        let key = ByteKey(topic.name)
        if let state = topics[key], let retained = state.retained {
            state.retained = nil
            counters.retainedTopics -= 1
            counters.retainedBytes -= UInt64(retained.payloadSize)
            retained.owner.retainedBytes -= retained.payloadSize
            retained.owner.retainedTopics -= 1
            forgetIfEmpty(retained.owner)
            retainedFrameBytes -= retained.frame.readableBytes
            listForgettable(state, key)
            markUnsaved(state)
            onEvent?(.cleared(topic, by: session.peer))
            awaitCommit(session)
        }
        replyOK(id, to: session)
    }

    /// Answers which rules decide `topic` for the session's peer, or for `uid`: only root may ask about others,
    /// who are then taken with their groups as ``groupsOfUser`` tells, and no unit.
    private func explain(_ topic: Topic, uid: UInt32?, id: UInt64?, for session: Session) {
        var peer = session.peer
        if let uid, uid != peer.uid {
            guard peer.uid == 0 else {
                let error = ProtocolError(.notPermitted, "only root may ask what another uid may do", requestID: id)
                return refuse(error, subject: topic.name, to: session)
            }
            let membership = groupsOfUser?(uid)
            peer = PeerCredentials(pid: 0, uid: uid, gid: membership?.gid ?? uid, groups: membership?.groups ?? [])
        }
        let decisions = [AccessPolicy.Access.publish, .read].map { access in
            let decision = configuration.accessPolicy.decide(access, topic: topic, peer: peer)
            return AccessExplanation.Decision(
                access: access.rawValue,
                isAllowed: decision.isAllowed,
                rule: decision.rule.description(toUID: session.peer.uid)
            )
        }
        var reply = allocator.buffer(capacity: 256)
        reply.writeExplanation(requestID: id, AccessExplanation(uid: peer.uid, decisions: decisions))
        queue(reply, to: session)
    }

    /// The topics `peer` may read that match `pattern`, in name order, after `after`: one page (see
    /// ``Command/topicsPageSize``), so that a reply stays small however many topics there are.
    private func topicInfos(matching pattern: TopicPattern?, after: Topic?, readableBy peer: PeerCredentials) -> [TopicInfo] {
        if let pattern, pattern.isLiteral {
            // One name: one lookup, not a scan and sort of every topic.
            guard let state = topics[ByteKey(pattern.text)], after.map({ state.topic > $0 }) ?? true,
                configuration.accessPolicy.allows(.read, topic: state.topic, peer: peer)
            else { return [] }
            return [state.info]
        }
        var page: [TopicState] = []
        forEachTopic(matching: pattern) { state in
            if let after, state.topic <= after { return }
            guard configuration.accessPolicy.allows(.read, topic: state.topic, peer: peer) else { return }
            page.append(state)
            // Keeps the first page's worth only: sorted and cut whenever it holds two pages.
            if page.count >= 2 * Command.topicsPageSize {
                page.sort { $0.topic < $1.topic }
                page.removeLast(page.count - Command.topicsPageSize)
            }
        }
        page.sort { $0.topic < $1.topic }
        return page.prefix(Command.topicsPageSize).map(\.info)
    }

    // MARK: - Output

    /// Sends a reply (or greeting): straight to the connection, or behind what is queued for it. While the session
    /// pauses its deliveries, a reply passes the live deliveries queued (see ``OutboundQueue``).
    private func queue(_ frame: ByteBuffer, to session: Session) {
        guard let transport = session.transport else { return }
        writeSpan(of: session)
        if takesFlowingFrame(session, transport) {
            transport.write(frame)
        } else {
            changingOutbox(of: session) { $0.appendReply(frame) }
        }
        markForFlush(session)
    }

    /// Whether a frame that flows while deliveries are paused (a reply, a buffered message `SUB … latest` brings)
    /// may be written to `session` now, ahead of nothing it must follow.
    private func takesFlowingFrame(_ session: Session, _ transport: any SessionTransport) -> Bool {
        guard transport.isWritable, !session.awaitsCommit else { return false }
        return session.outbox.isEmpty || (session.pausesDeliveries && !session.outbox.hasFlowingEntries)
    }

    /// Sends a delivery of this batch: added to the session's span when the connection takes it, else copied into
    /// its bounded queue.
    private func deliver(
        _ frame: Range<Int>,
        of state: TopicState,
        sequence: UInt64,
        payloadSize: Int,
        to target: SubscriberTarget
    ) {
        let session = target.session
        guard let transport = session.transport else { return }
        markForFlush(session)
        if session.outbox.isEmpty && transport.isWritable && !session.pausesDeliveries && !session.awaitsCommit
            && !writeBufferIsOverBudget(session)
        {
            if session.spanGeneration == batch.generation, !session.span.isEmpty, session.span.upperBound == frame.lowerBound {
                session.span = session.span.lowerBound..<frame.upperBound
            } else {
                writeSpan(of: session)
                session.span = frame
                session.spanGeneration = batch.generation
            }
            state.delivered += 1
            counters.messagesOut += 1
            counters.bytesOut += UInt64(payloadSize)
            return
        }
        batch.withBytes(frame) { enqueue($0, of: state, sequence: sequence, payloadSize: payloadSize, to: target) }
    }

    /// Sends a buffered message that a `SUB … latest` brings: straight to the connection when it takes it, else into
    /// its bounded queue. Asked for, it flows while live deliveries are paused, as the `OK` after it does.
    private func replay(_ frame: ByteBuffer, of state: TopicState, sequence: UInt64, payloadSize: Int, to target: SubscriberTarget) {
        let session = target.session
        guard let transport = session.transport else { return }
        markForFlush(session)
        writeSpan(of: session)
        if takesFlowingFrame(session, transport) {
            transport.write(frame)
            state.delivered += 1
            counters.messagesOut += 1
            counters.bytesOut += UInt64(payloadSize)
            return
        }
        frame.withUnsafeReadableBytes {
            enqueue($0, of: state, sequence: sequence, payloadSize: payloadSize, to: target, isReplay: true)
        }
    }

    /// Writes the session's span of this batch to its connection, if it has one.
    private func writeSpan(of session: Session) {
        guard session.spanGeneration == batch.generation, !session.span.isEmpty else { return }
        let frames = batch.frame(session.span, allocator: allocator)
        session.span = 0..<0
        session.transport?.write(frames)
    }

    /// Queues a delivery for a connection that does not take it now; its subscription's overflow policy makes room
    /// (or disconnects it).
    private func enqueue(
        _ frame: UnsafeRawBufferPointer,
        of state: TopicState,
        sequence: UInt64,
        payloadSize: Int,
        to target: SubscriberTarget,
        isReplay: Bool = false
    ) {
        let session = target.session
        guard let transport = session.transport else { return }
        writeSpan(of: session)
        // The uid's share and the daemon's as well as the connection's own: past either, this connection's queue
        // counts as full.
        var limits = configuration.queueLimits
        let room = min(
            configuration.maxQueuedBytesPerUser - session.account.queuedBytes,
            configuration.maxQueuedBytesTotal - counters.queuedBytes
        )
        limits.bytes = min(limits.bytes, session.outbox.byteCount + max(0, room))
        let dropped = changingOutbox(of: session) {
            $0.appendDelivery(
                frame,
                topic: state,
                sequence: sequence,
                payloadSize: payloadSize,
                policy: target.overflow,
                limits: limits,
                isReplay: isReplay
            )
        }
        guard let dropped else {
            onEvent?(.disconnectedSlowSubscriber(session.peer, queuedMessages: session.outbox.messageCount))
            // Nothing more goes to it from now on; it is closed once this batch's work is done.
            session.detachTransport()
            disconnecting.append((session, transport))
            return
        }
        if dropped > 0 {
            counters.dropped += UInt64(dropped)
            // Reported once per batch: a subscriber that never reads drops a message for every one published.
            session.droppedSinceReport += dropped
        }
    }

    private func markForFlush(_ session: Session) {
        if !session.hasUnflushedFrames {
            session.hasUnflushedFrames = true
            sessionsToFlush.append(session)
        }
    }

    private func replyOK(_ id: UInt64?, value: UInt64? = nil, to session: Session) {
        var reply = allocator.buffer(capacity: 32)
        reply.writeOK(requestID: id, value: value)
        queue(reply, to: session)
    }

    /// The `not-permitted` error for `access` to `topic` by `session`'s peer, if the policy denies it.
    private func denial(_ access: AccessPolicy.Access, of topic: Topic, to session: Session, id: UInt64?) -> ProtocolError? {
        let decision = configuration.accessPolicy.decide(access, topic: topic, peer: session.peer)
        guard !decision.isAllowed else { return nil }
        let verb = access == .publish ? "publish to or clear" : "read"
        let sentence = "uid \(session.peer.uid) may not \(verb) \"\(topic.name)\": \(decision.rule.description(toUID: session.peer.uid));"
            + " EXPLAIN \(topic.name) (notify explain) shows who may"
        return ProtocolError(.notPermitted, sentence, requestID: id)
    }

    /// Answers `error` and reports it as an event.
    private func refuse(_ error: ProtocolError, subject: String?, to session: Session) {
        reply(error, to: session)
        onEvent?(.refused(error, subject: subject, by: session.peer))
    }

    private func reply(_ error: ProtocolError, to session: Session) {
        var reply = allocator.buffer(capacity: error.message.utf8.count + 40)
        reply.writeError(error)
        queue(reply, to: session)
    }
}
