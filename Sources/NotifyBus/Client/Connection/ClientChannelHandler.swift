import NIOCore
import NotifyProtocol

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

    var context: ChannelHandlerContext?
    let greeting: EventLoopPromise<ServerGreeting>
    /// Decodes here rather than in a `ByteToMessageHandler` of its own, as the daemon does: passing each frame down
    /// the pipeline boxes it in an existential and casts it back, which cost more than the rest of a delivery.
    @exclusivity(unchecked) var decoder = ServerFrameDecoder()
    /// The start of a frame whose end has not arrived yet; nil between frames.
    @exclusivity(unchecked) var unread: ByteBuffer?
    /// The most bytes one frame may take: the largest payload any daemon may announce and its line. A list (`TOPICS`,
    /// `STATS`) says how many lines follow, a number a peer at the socket chooses; past this it is not one a daemon
    /// sends (its pages are 10,000 lines), and the connection is closed rather than its bytes held.
    var largestFrame = ProtocolLimits.largestPayload + 64 << 10
    var nextRequestID: UInt64 = 1
    /// Requests whose reply someone waits for, by id. Requests without one (publishes without ack) are not
    /// listed: an `ERR` with an id found nowhere here belongs to one of them.
    @exclusivity(unchecked) var waiting: [UInt64: ReplyWaiter] = [:]
    /// Requests answered by several `LAST` frames and then an `OK` (`HISTORY`): what came so far, and who waits.
    var collections: [UInt64: (deliveries: [Delivery], promise: EventLoopPromise<[Delivery]>)] = [:]
    /// Errors that fire-and-forget requests received, for the next `flush` to report.
    var deferredErrors: [ProtocolError] = []
    @exclusivity(unchecked) var subscriptions: [UInt64: LocalSubscription] = [:]
    var nextSubscriptionID: UInt64 = 1
    /// Local subscription id per pattern, to route deliveries without testing every pattern.
    let routes = SubscriptionIndex<UInt64>()
    /// How many local subscriptions hold each pattern; the daemon holds it once.
    var patternUsers: [TopicPattern: Int] = [:]
    /// The local subscription each `SUB … latest` still waiting for its `OK` was sent for, by request id: the
    /// buffered messages it brings (`LAST` frames with that id) are for that subscription alone.
    var replayTargets: [UInt64: UInt64] = [:]
    /// The pattern of each `SUB … since=` not answered yet, by request id (see ``LocalSubscription/historyReplays``).
    var historyReplayPatterns: [UInt64: TopicPattern] = [:]
    /// The subscriptions over their high-water marks whose consumers have not caught up yet.
    @exclusivity(unchecked) var fullSubscriptions: Set<UInt64> = []
    /// Whether the daemon understands `OPT pause` (protocol 2 and later).
    var daemonPauses = false
    /// Whether the daemon was last asked to pause deliveries.
    var pausedAtDaemon = false
    /// Whether the channel reads (NIO's `autoRead`).
    var isReading = true
    /// Whether it reads although a subscription is at its hard limit, for a reply someone waits for: what comes for
    /// such a subscription meanwhile is dropped and announced.
    @exclusivity(unchecked) var isReadingPastLimit = false
    var closedByUser = false
    /// The fire-and-forget publishes waiting to go out; written before any other request, so that all go in call
    /// order.
    var outbox: PublishOutbox?
    /// What the outbox still held when the connection was lost, for the client to send on its next connection.
    var leftoverPublishes: ByteBuffer?
    /// The local subscriptions each recent topic goes to (see ``subscriptions(matching:)``); emptied whenever the
    /// subscriptions change.
    @exclusivity(unchecked) var routeCache: [Topic: [LocalSubscription]] = [:]
    /// The last topic routed and where it went: a topic's messages usually come in runs, and the decoder hands the
    /// same string again for the same topic, so telling it is the same costs no hashing.
    @exclusivity(unchecked) var lastRoute: (topic: Topic, subscriptions: [LocalSubscription])?
    /// Whether a read of the socket is under way: events given meanwhile are handed over at its end, together.
    @exclusivity(unchecked) var inRead = false
    /// The subscriptions given events in the read under way.
    @exclusivity(unchecked) var handOvers: [LocalSubscription] = []
    var greeted = false
    var failure: NotifyClientError?
    /// An `ERR storage` without a request id: if the daemon closes the connection next, the reason it did.
    var closingReason: ProtocolError?

    init(greeting: EventLoopPromise<ServerGreeting>) {
        self.greeting = greeting
    }

    /// Completes with the daemon's greeting, the first frame it sends.
    var greetingFuture: EventLoopFuture<ServerGreeting> { greeting.futureResult }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
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
