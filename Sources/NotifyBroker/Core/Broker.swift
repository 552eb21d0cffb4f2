import NIOCore
public import NotifyProtocol

/// The heart of notifyd: topics, subscriptions, buffered latest messages, sequence numbers and fan-out, without
/// any I/O. The daemon feeds it decoded requests and gives it a ``SessionTransport`` per connection; tests do the
/// same with buffers.
///
/// ## Threading
/// A broker and its sessions belong to one thread (the daemon's single event loop). No method is thread-safe, and
/// none needs a lock: that is what keeps the per-message path short. The same holds for every part below.
///
/// ## Where things are
/// The broker's state is a handful of values, each with one job, that it owns and that are tested without it:
///
/// | value | its job | folder |
/// | --- | --- | --- |
/// | ``TopicTable`` of ``TopicState``s | topic name -> sequence, buffered message, counters; the limit on topics, the topics forgotten to make room | TopicTable |
/// | `SubscriberRouting` | which sessions a topic's messages go to: the ``SubscriptionIndex`` by pattern, each topic's cached list, the bound on all lists | Sessions |
/// | `ConnectionRegistry` | the open ``Session``s, one ``UserAccount`` per uid that holds anything, unread bytes | Sessions |
/// | ``HistoryLedger``, `PendingHistory` | who pays for the topics' ``TopicHistory``; the batch's messages on their way into them | History |
/// | ``DeliveryBatch`` | the batch's frames, encoded once and shared by every subscriber's span; a slow one's ``OutboundQueue`` | Output |
/// | `PublishClock` | the time stamped on a batch's messages, never earlier than one before | Core |
/// | `StateJournal`, `StateLogHealth`, `GroupCommit` | what the batch owes the ``StateLog``; whether it can be written; which acknowledgements wait for which `fsync` | Persistence |
/// | ``AccessPolicy`` (in the configuration) | who may publish, read and clear what | Access |
/// | `FleetLink` | the fleet service's follower and importer, what was taken in and missed | Fleet |
///
/// What the broker does with them is in one extension per concern, beside the values it works on:
/// `Broker+Publish.swift` (a publish, from its checks to the fan-out and the buffered message),
/// `Broker+Subscriptions.swift` (`SUB`, `UNSUB`, the replay of `SUB … latest`), `Broker+Connections.swift` (sessions
/// coming and going, the limits per user), `Broker+Topics.swift` (`LATEST`, `CLEAR`, `TOPICS`), `Broker+History.swift`
/// (what a topic keeps, its limits, resumes with `since`), `Broker+Output.swift` (replies and deliveries,
/// ``flush()``), `Broker+Access.swift` (denials, `EXPLAIN`), `Broker+Persistence.swift` (the log: recovery, each
/// batch's commit before its replies, a failed write answered) and `Broker+Sync.swift` (acknowledgements after an
/// `fsync`), `Broker+Fleet.swift` (`FOLLOW`, `IMPORT`, `MISSED`, `FLEETSTATS`, what goes out as `EXP`) and
/// `Broker+Imports.swift` (another host's messages taken in, checked by the `ImportFilter`). This file holds the
/// state and the dispatch of requests; ``BrokerConfiguration``, ``BrokerStatistics`` and ``BrokerEvent`` are what it
/// is told, counts and says.
///
/// A publish goes one way through them: ``handle(_:from:)`` → `publish` (Broker+Publish) → its topic in the
/// ``TopicTable`` → its frame encoded once into the ``DeliveryBatch`` → the sessions `SubscriberRouting` lists → each
/// subscriber's span of the batch, or its ``OutboundQueue`` (Broker+Output) → the ``SessionTransport`` at ``flush()``;
/// the topic marked in the `StateJournal`, written before the batch's replies leave.
///
/// `Session.subscriptions` (session -> subscriptions) is the other direction of the routing's index, kept in step
/// with it by `subscribe`, `unsubscribe` and `close` only. Closed sessions drop their transport, so a stale cached
/// list never keeps a connection alive, and the stale lists are let go when the daemon is idle
/// (``releaseIdleMemory()``).
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
    @exclusivity(unchecked) public internal(set) var configuration: BrokerConfiguration

    /// A uid's primary and supplementary groups, for `EXPLAIN` about another uid; without it such a uid is taken
    /// to have the gid of the same number and no supplementary groups.
    @exclusivity(unchecked) public var groupsOfUser: ((UInt32) -> (gid: UInt32, groups: [UInt32])?)?

    /// Called with events worth logging; the broker's thread calls it.
    @exclusivity(unchecked) public var onEvent: ((BrokerEvent) -> Void)?
    /// The fleet service's link: its follower, its importer, what was taken in and what was missed.
    let fleet = FleetLink()

    // The state touched per message is marked `@exclusivity(unchecked)` here, in `TopicState` and in `Session`: all of
    // it is owned by the broker's one thread and never accessed overlapping, and the runtime's checks of class
    // properties cost a sixth of a publish (profiled with perf on 1→1 16-byte publishes).

    // Topics and subscriptions.
    @exclusivity(unchecked) var topicTable: TopicTable
    /// Which sessions each topic's messages go to.
    @exclusivity(unchecked) var routing = SubscriberRouting()
    /// Who pays for the topics' history.
    @exclusivity(unchecked) var historyLedger = HistoryLedger()
    /// Messages of this batch on their way into their topics' histories (see ``settleHistory()``).
    @exclusivity(unchecked) var pendingHistory = PendingHistory()
    /// Bumped by every configuration applied, so that each topic looks up its history limits again.
    @exclusivity(unchecked) var configurationGeneration: UInt64 = 0

    // Connections and users.
    /// The sessions open and what each uid holds through them.
    @exclusivity(unchecked) var connections = ConnectionRegistry()
    @exclusivity(unchecked) var greeting: ByteBuffer

    // Output of the current batch.
    let allocator = ByteBufferAllocator()
    @exclusivity(unchecked) var batch: DeliveryBatch
    @exclusivity(unchecked) var sessionsToFlush: [Session] = []
    /// The accounts whose connections were replayed history in this batch (``UserAccount/replayedBytes``).
    @exclusivity(unchecked) var accountsReplayedTo: [UserAccount] = []
    /// Subscribers disconnected in this batch for falling behind under `disconnect`, with their connections: closed
    /// by ``flush()``, never in the middle of the fan-out that overflowed them. Closing a connection runs work of its
    /// own (its held-back publishes; the daemon's handler flushes), which must not run inside another publish.
    @exclusivity(unchecked) var disconnecting: [(session: Session, transport: any SessionTransport)] = []

    /// The time stamped on this batch's messages, and never one earlier than any before.
    @exclusivity(unchecked) var clock: PublishClock
    @exclusivity(unchecked) var counters: BrokerStatistics

    // The state log.
    /// The log, whether it can be written, and what this batch owes it.
    @exclusivity(unchecked) var journal = StateJournal()
    /// Why the state log cannot be written, while it cannot: retained publishes are refused meanwhile.
    public var stateProblem: String? { journal.health.problem }
    /// Sessions whose acknowledgements wait for this batch's commit (see ``Session/awaitsCommit``).
    @exclusivity(unchecked) var sessionsAwaitingCommit: [Session] = []
    /// Where the log's `fsync` runs under `sync = always`; nil: on this thread, before the batch's replies leave.
    /// Set before the first connection.
    public var stateSyncer: (any StateLogSyncer)?
    /// Which acknowledgements wait for which sync of the log, and whether another must follow the one under way.
    @exclusivity(unchecked) var groupCommit = GroupCommit()

    /// How far ahead of a topic's sequence number the state log's ceiling is written.
    public static let sequenceReserve = StateLog.sequenceReserve

    /// Work done since the broker started, in units of about one request: a request costs one, and one that walks
    /// the topic table one more per 64 topics it walks. The daemon reads a connection in turns of a fixed amount of
    /// it, so that one client's burst of costly requests does not keep everyone else (and the watchdog) waiting.
    @exclusivity(unchecked) public internal(set) var workDone = 0

    /// A figure that changes whenever the broker does anything: a request, a message in or out (a queue drained
    /// included), a connection opened or closed. The daemon gives memory back once it stopped changing
    /// (``releaseIdleMemory()``): what a subscriber's leaving or catching up left to let go of is let go of too.
    public var activity: Int {
        workDone &+ Int(truncatingIfNeeded: counters.messagesIn &+ counters.messagesOut &+ counters.connectionsTotal)
            &+ counters.connections
    }

    /// The length of the list of topics it may forget, for tests: it stays within the number of topics.
    var forgettableTopicCount: Int { topicTable.forgettableCount }

    /// What the broker holds now and has done since it started.
    public var statistics: BrokerStatistics {
        var current = counters
        current.subscriptions = routing.index.count
        current.topics = topicTable.count
        current.retainedTopics = topicTable.retainedTopics
        current.retainedBytes = topicTable.retainedBytes
        current.historyMessages = historyLedger.messages
        current.historyBytes = historyLedger.payloadBytes
        return current
    }

    /// Creates a broker.
    /// - Parameters:
    ///   - configuration: the limits to enforce.
    ///   - clock: the time stamped on publishes; tests pass their own.
    public init(configuration: BrokerConfiguration = .default, clock: @escaping () -> PublishTime = PublishTime.now) {
        self.configuration = configuration
        self.clock = PublishClock(clock)
        self.counters = BrokerStatistics(startTime: clock())
        self.topicTable = TopicTable(maxTopics: configuration.maxTopics)
        self.greeting = Broker.greeting(for: configuration)
        self.batch = DeliveryBatch(allocator: allocator)
    }

    /// A daemon never lets go of its broker, but a program or a test that embeds one does: its objects hold one
    /// another (an account, the order of the histories it pays for, whose topics hold their publishers' accounts;
    /// a topic, the sessions it delivers to, which hold their accounts), and those rings would outlive it.
    deinit {
        for account in connections.accounts.values { account.historyOrder.removeAll() }
        for state in topicTable.all { state.invalidateSubscribers() }
    }

    /// Applies new limits: to new connections (the greeting and frame sizes they are told), and to what every
    /// connection asks from now on (subscriptions beyond a lowered limit are kept, new ones refused). A new access
    /// policy decides every operation from now on, deliveries to subscriptions already made included.
    public func reconfigure(_ configuration: BrokerConfiguration) {
        settleHistory()
        let policyChanged = configuration.accessPolicy != self.configuration.accessPolicy
        self.configuration = configuration
        topicTable.maxTopics = configuration.maxTopics
        configurationGeneration &+= 1
        applyHistoryLimits()
        greeting = Broker.greeting(for: configuration)
        // The cached subscriber lists were filtered by the old policy: subscriptions already made now deliver what
        // the new one lets them read, no more and no less; and what waits in the queues for a topic a connection may
        // no longer read is not sent either.
        if policyChanged {
            routing.everyListChanged()
            let policy = configuration.accessPolicy
            for session in connections.open where !session.outboxIsEmpty {
                changingOutbox(of: session) { $0.removeDeliveries { !policy.allows(.read, topic: $0, peer: session.peer) } }
            }
        }
    }

    /// Counts a reload of the daemon's configuration once the daemon is done with it: applied, or refused because
    /// the file could not be used. Whoever asked for it learns from `STATS` that it is over, and how it went.
    public func recordReload(applied: Bool) {
        if applied { counters.reloads += 1 } else { counters.reloadsFailed += 1 }
    }

    static func greeting(for configuration: BrokerConfiguration) -> ByteBuffer {
        var greeting = ByteBuffer()
        greeting.writeGreeting(ServerGreeting(limits: configuration.protocolLimits))
        return greeting
    }

    // MARK: - Requests

    /// Carries out one decoded frame from `session`, queuing its replies and deliveries; or, while its connection
    /// does not take replies, keeps it until ``writabilityChanged(_:)`` (see ``Session/isHoldingBack``).
    ///
    /// Holding back is what bounds a client that sends requests and never reads: its replies could be many times
    /// the size of its requests (a `TOPICS` is a few bytes, its answer may be megabytes).
    public func handle(_ decoded: DecodedRequest, from session: Session) {
        guard admits(from: session, holding: decoded) else { return }
        carryOut(decoded, from: session)
    }

    /// Counts a request as work and says whether to carry it out now: not for a session that is closing, and not
    /// while its connection does not take replies, or holds unread replies past its uid's (or the daemon's) budget
    /// of queued bytes, when the request (`held`, made only then) waits its turn: replies are never dropped, so
    /// what bounds them is that a connection that does not read them gets no more requests carried out.
    @inline(__always)
    func admits(from session: Session, holding held: @autoclosure () -> DecodedRequest) -> Bool {
        workDone &+= 1
        guard !session.isClosed, !session.closesAfterFlush else { return false }
        // A session whose OK waits for the state log's sync sends nothing more until it is synced: its next requests
        // go in the next sync, however fast it pipelines (no session outruns the group commit and starves).
        if session.isHoldingBack || session.waitsForSync || !session.transportIsWritable || writeBufferIsOverBudget(session) {
            session.heldBack.append(held())
            return false
        }
        return true
    }

    func carryOut(_ decoded: DecodedRequest, from session: Session) {
        guard !session.isClosed, !session.closesAfterFlush else { return }
        switch decoded {
        case .request(let request):
            handle(request, from: session)
        case .failure(let error):
            refuse(error, subject: nil, to: session)
            if error.closesConnection { session.closesAfterFlush = true }
        }
    }

    func handle(_ request: Request, from session: Session) {
        let id = request.id
        // Every request but a publish may read a history or its counts: they must be whole.
        if !pendingHistory.isEmpty, !request.command.isPublish { settleHistory() }
        switch request.command {
        case .publish(let topic, let payload, let options):
            payload.withUnsafeReadableBytes { publish(topic, payload: $0, options: options, id: id, from: session) }
        case .subscribe(let pattern, let options):
            subscribe(session, to: pattern, options: options, id: id)
        case .unsubscribe(let pattern):
            unsubscribe(session, from: pattern, id: id)
        case .latest(let topic):
            latest(topic, id: id, for: session)
        case .clear(let topic):
            clear(topic, id: id, for: session)
        case .history(let topic, let count):
            history(topic, count: count, id: id, for: session)
        case .topics(let pattern, let after):
            var reply = allocator.buffer(capacity: 64)
            reply.writeTopics(requestID: id, topicInfos(matching: pattern, after: after, readableBy: session.peer))
            queue(reply, to: session)
        case .stats:
            var reply = allocator.buffer(capacity: 256)
            var stats = statistics.counters(now: clock.now())
            if journal.log != nil {
                stats.counters += [
                    .init(name: "state_log_unsaved", value: stateProblem == nil ? 0 : 1),
                    .init(name: "state_log_failures", value: journal.health.failures),
                ]
            }
            stats.counters += fleetCounters
            stats.counters += fleet.reported
            reply.writeStats(requestID: id, stats)
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
        case .follow, .importMessage, .announceMissed, .fleetStats:
            handleFleetRequest(request, from: session)
        }
    }
}
