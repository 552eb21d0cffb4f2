import NATSClient
import NIOCore

/// Reads this host's durable consumer of the stream of exports (``JetStreamEvents``) on one connection: what other
/// hosts published while this one was away first, then each export as the stream stores it. With catch-up on, it is
/// the bridge's only way in for other hosts' messages, so they come in the stream's order (each origin's order), and
/// what was taken in is acknowledged, so the consumer starts from there next time.
///
/// Lives on the bridge's event loop. A pull request asks for a batch and waits on the server for it; the next is
/// sent when the batch is in, or when the server ends the request (`404`, `408`). The last message taken in is
/// acknowledged (the consumer acknowledges everything up to it) once the daemon has carried it out
/// (``confirmed``, a `PING` on the daemon's link): a message handed over but lost with the link, or with a daemon that
/// stopped, is never acknowledged, so the stream delivers it again (and the daemon skips what it took in already).
final class CatchUpReader {
    private let connection: NATSConnection
    private let events: JetStreamEvents
    private let eventLoop: any EventLoop
    /// Takes a message in: the bridge's import path.
    private let take: (NATSMessage) -> Void
    /// Told how many messages the stream no longer had when the reader came to them (a jump in its numbers).
    private let missed: (UInt64) -> Void
    /// Succeeds once the daemon has carried out everything handed to it before the call.
    private let confirmed: () -> EventLoopFuture<Void>
    /// The stream sequence number of the last message read.
    private var readThrough: UInt64
    /// Succeeds when the reader reaches the present: nothing older waits for it in the stream.
    let caughtUp: EventLoopPromise<Void>
    private var subscription: String?
    private let inbox = "_INBOX.\(UInt64.random(in: 1...UInt64.max)).events"
    /// Messages asked for and not received yet.
    private var requested = 0
    private var lastToAcknowledge: String?
    private var acknowledgeIsScheduled = false
    private var isStopped = false
    /// When the server last answered a pull request (a message or a status).
    private var lastAnswer = NIODeadline.now()
    /// Messages waiting for this host in the stream, as of the last one read.
    private(set) var lag: UInt64
    private(set) var isCaughtUp = false

    init(
        connection: NATSConnection,
        events: JetStreamEvents,
        at position: JetStreamEvents.Position,
        take: @escaping (NATSMessage) -> Void,
        missed: @escaping (UInt64) -> Void,
        confirmed: @escaping () -> EventLoopFuture<Void>
    ) {
        self.connection = connection
        self.events = events
        self.eventLoop = connection.eventLoop
        self.take = take
        self.missed = missed
        self.confirmed = confirmed
        self.lag = position.pending
        self.readThrough = position.readThrough
        self.caughtUp = connection.eventLoop.makePromise(of: Void.self)
    }

    /// Subscribes its inbox and sends the first pull request.
    func start() {
        subscription = connection.subscribe(to: inbox) { [weak self] message in self?.receive(message) }
        if lag == 0 { reachPresent() }
        pull()
        watch()
    }

    /// A pull request waits on the consumer's leader; when that server dies, the request is gone without an answer
    /// (a new leader knows nothing of it). One not answered well past its expiry is sent again.
    private func watch() {
        eventLoop.assumeIsolated().scheduleTask(in: .seconds(1)) { [weak self] in
            guard let self, !isStopped else { return }
            if NIODeadline.now() - lastAnswer > JetStreamEvents.pullExpiry + .seconds(1) {
                lastAnswer = .now()
                pull()
            }
            watch()
        }
    }

    /// Acknowledges what was taken in and stops reading (the connection is being let go of, or catch-up turned off).
    func stop() {
        guard !isStopped else { return }
        // What the daemon has not confirmed is not acknowledged: the stream delivers it again next time.
        isStopped = true
        if let subscription { connection.unsubscribe(subscription) }
        if !isCaughtUp { caughtUp.fail(NATSError("the connection ended before catch-up was done")) }
    }

    private func pull() {
        guard !isStopped else { return }
        requested = JetStreamEvents.batch
        connection.sendNow([.publish(subject: events.nextSubject, replyTo: inbox, headers: nil, payload: JetStreamEvents.pullBody)])
    }

    private func receive(_ message: NATSMessage) {
        guard !isStopped else { return }
        lastAnswer = .now()
        if let status = message.headers?.status {
            // 404 no messages, 408 the request expired: the present is reached, ask again (a request waits on the
            // server). 409 and others (the consumer changed, too many requests): ask again a little later.
            if status == 404 || status == 408 {
                lag = 0
                reachPresent()
                pull()
            } else {
                eventLoop.assumeIsolated().scheduleTask(in: .seconds(1)) { [weak self] in self?.pull() }
            }
            return
        }
        // Any client of the server that learns the inbox can publish to it: only a delivery of this host's consumer
        // is taken in, and only its reply subject is acknowledged (one of its own would have this daemon publish
        // there, under its login).
        guard let reply = message.replyTo, let delivery = JetStreamDelivery(replySubject: reply),
            delivery.stream == events.streamName, delivery.consumer == events.consumerName
        else { return }
        requested -= 1
        lag = delivery.pending
        lastToAcknowledge = reply
        // Every message of the stream comes to this consumer: a number skipped is one gone before it was read (aged
        // out, or pushed out by the byte bound, while this host was slow or away). A redelivery is older.
        let skipped = JetStreamEvents.skipped(after: readThrough, to: delivery.streamSequence)
        if skipped > 0 { missed(skipped) }
        readThrough = max(readThrough, delivery.streamSequence)
        take(message)
        if lag == 0 { reachPresent() }
        scheduleAcknowledge()
        if requested <= 0 { pull() }
    }

    private func reachPresent() {
        guard !isCaughtUp else { return }
        isCaughtUp = true
        caughtUp.succeed(())
    }

    private func scheduleAcknowledge() {
        guard !acknowledgeIsScheduled else { return }
        acknowledgeIsScheduled = true
        eventLoop.assumeIsolated().execute { [weak self] in
            guard let self else { return }
            acknowledgeIsScheduled = false
            acknowledgeOnceConfirmed()
        }
    }

    /// Acknowledges the last message taken in, and with it every one before (the consumer's `ack_policy` is `all`),
    /// once the daemon has carried them out; not when the link is lost first.
    private func acknowledgeOnceConfirmed() {
        guard !isStopped, let subject = lastToAcknowledge else { return }
        lastToAcknowledge = nil
        confirmed().assumeIsolated().whenSuccess { [weak self] in
            guard let self, !isStopped else { return }
            connection.sendNow([.publish(subject: subject, replyTo: nil, headers: nil, payload: ByteBuffer())])
        }
    }
}
