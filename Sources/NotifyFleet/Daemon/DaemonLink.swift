package import Logging
package import NIOCore
import NIOPosix
package import NotifyProtocol

#if canImport(Glibc)
import Glibc
#endif

/// The fleet service's connection to this host's daemon (protocol 5; PROTOCOL.md, "The fleet service"): it follows
/// the daemon's exports (`FOLLOW`, then an `EXP` frame per local publish) and hands it other hosts' messages
/// (`IMPORT`), what was lost on the way (`MISSED`) and the fleet's counters (`FLEETSTATS`).
///
/// Lives on the fleet's one event loop, with the NATS connection: an export goes from the daemon's frame to the
/// outbox, and an import from NATS to this connection's buffer, without a hop between threads. Requests written in
/// one turn of the loop go out as one write. What it holds for the daemon is bounded
/// (``DaemonLink/pendingLimit``): past it, imports are not sent, and counted, while the daemon does not read.
package final class DaemonLink {
    package let socketPath: String
    let eventLoop: any EventLoop
    let logger: Logger
    /// The patterns `FOLLOW` names: what goes out.
    package var exportPatterns: [TopicPattern]

    /// Called on the loop once the daemon greeted with protocol 5 and took `FOLLOW`.
    package var onLinked: (() -> Void)?
    /// Called on the loop when a link that was up is lost (the daemon stopped or restarted).
    package var onLost: (() -> Void)?
    /// Called on the loop with each export.
    package var onExport: ((FleetExport) -> Void)?

    private var channel: (any Channel)?
    package private(set) var isLinked = false
    /// Whether the daemon's frames wait unread (``pauseReading()``): the daemon's queue for this service then holds
    /// them, within its bounds, instead of this service's outbox dropping them.
    package private(set) var isReadingPaused = false
    /// Reads on again what the connection's handler kept while paused.
    fileprivate var resumeHandler: (() -> Void)?
    /// The sizes the daemon takes, from its greeting.
    package private(set) var limits = ProtocolLimits.default
    private var isStopped = false
    /// Bumped when a connection ends, so that callbacks of an older one do nothing.
    fileprivate var generation: UInt64 = 0
    private var retryDelay = DaemonLink.firstRetryDelay
    private var failedAttempts = 0
    /// Requests written this turn of the loop, sent as one write at its end.
    private var pending = ByteBuffer()
    private var flushIsScheduled = false
    /// Bytes handed to the channel that the socket has not taken yet.
    private var unwritten = 0
    /// Whether the imports a lost link takes with it come again by themselves: true while the fleet's log is read
    /// from where the daemon last confirmed (the bridge falls back there when the link is lost). Then they are not
    /// announced as lost.
    package var redeliversLostImports = false
    /// Imports in ``pending``, and those handed to the channel and not written yet: what a lost link takes with it.
    private var pendingImports: UInt64 = 0
    private var unwrittenImports: UInt64 = 0
    private var nextPingID: UInt64 = 1
    private var pings: [UInt64: EventLoopPromise<Void>] = [:]

    /// Exports the daemon dropped because this service did not read them in time (its `DROP` notices).
    package private(set) var exportsDropped: UInt64 = 0
    /// Imports not sent: the daemon was not linked, or did not read while the link held ``pendingLimit``.
    package private(set) var importsNotSent: UInt64 = 0
    /// Of ``importsNotSent``, those the daemon has not been told of yet: it announces them (`MISSED`) to its
    /// subscribers once the link takes requests again, so no loss is silent.
    private var unannounced: UInt64 = 0
    /// Imports the daemon refused (its `ERR`s), logged a few at a time.
    package private(set) var importsRefused: UInt64 = 0

    static let firstRetryDelay = TimeAmount.milliseconds(100)
    static let longestRetryDelay = TimeAmount.seconds(5)
    /// The most bytes of requests held for a daemon that does not read: 16 MiB, a few seconds of imports at full
    /// speed.
    package static let pendingLimit = 16 << 20

    package init(socketPath: String, exportPatterns: [TopicPattern], eventLoop: any EventLoop, logger: Logger) {
        self.socketPath = socketPath
        self.exportPatterns = exportPatterns
        self.eventLoop = eventLoop
        self.logger = logger
    }

    /// Connects, and connects again whenever the link is lost, until ``stop()``. Call on the loop.
    package func start() {
        connect()
    }

    /// Closes the link; nothing more is sent or received.
    package func stop() {
        isStopped = true
        generation += 1
        isLinked = false
        failPings()
        channel?.close(promise: nil)
        channel = nil
    }

    /// Sends `request` with the others of this turn of the loop. Returns false, and counts it, when it cannot go:
    /// no link, or the daemon has not read ``pendingLimit`` bytes already.
    @discardableResult
    package func send(_ request: Request) -> Bool {
        guard isLinked, channel != nil, unwritten + pending.readableBytes <= Self.pendingLimit else {
            if case .importMessage = request.command {
                importsNotSent += 1
                unannounced += 1
            }
            return false
        }
        if unannounced > 0 { writeUnannounced() }
        pending.writeRequest(request)
        if case .importMessage = request.command { pendingImports += 1 }
        scheduleFlush()
        return true
    }

    /// Sends `message` as an `IMPORT`, its `<host>/<unit>` field given (made once for a run of one publisher's),
    /// written straight into this turn's requests. Counted and refused as ``send(_:)`` refuses.
    @discardableResult
    package func sendImport(_ message: FleetImport, unitField: String) -> Bool {
        guard isLinked, channel != nil, unwritten + pending.readableBytes <= Self.pendingLimit else {
            importsNotSent += 1
            unannounced += 1
            return false
        }
        if unannounced > 0 { writeUnannounced() }
        let delivery = message.delivery
        var lineStart = 0
        delivery.payload.withUnsafeReadableBytes { payload in
            _ = pending.writeMessageFrame(
                .fleetImport(message.kind, replayed: message.replayed),
                requestID: nil,
                topic: delivery.topic.name,
                sequence: delivery.sequence,
                time: delivery.time,
                uid: delivery.publisher.uid,
                pid: delivery.publisher.pid,
                unitField: unitField,
                payload: payload,
                lineStart: &lineStart
            )
        }
        pendingImports += 1
        scheduleFlush()
        return true
    }

    /// Tells the daemon of the imports it did not get (`MISSED`), before the next request.
    private func writeUnannounced() {
        pending.writeRequest(Request(.announceMissed(unannounced)))
        logger.log(.daemonLinkProblem, .warning, "\(unannounced) messages of other hosts could not be handed to the daemon (it was away, or did not read); its subscribers are told of the drop")
        unannounced = 0
    }

    /// Succeeds once the daemon has carried out every request sent before (a `PING` answered); fails if the link is
    /// lost first.
    package func sync() -> EventLoopFuture<Void> {
        let promise = eventLoop.makePromise(of: Void.self)
        let id = nextPingID
        nextPingID += 1
        guard send(Request(id: id, .ping)) else {
            promise.fail(DaemonLinkError("the daemon is not linked"))
            return promise.futureResult
        }
        pings[id] = promise
        return promise.futureResult
    }

    private func scheduleFlush() {
        guard !flushIsScheduled else { return }
        flushIsScheduled = true
        eventLoop.assumeIsolated().execute { [self] in
            flushIsScheduled = false
            guard let channel, pending.readableBytes > 0 else { return }
            let bytes = pending
            pending = channel.allocator.buffer(capacity: min(bytes.capacity, 1 << 20))
            let size = bytes.readableBytes
            let imports = pendingImports
            let generation = self.generation
            unwritten += size
            unwrittenImports += imports
            pendingImports = 0
            channel.writeAndFlush(bytes).assumeIsolated().whenComplete { [self] _ in
                guard generation == self.generation else { return }
                unwritten -= size
                unwrittenImports -= imports
            }
        }
    }

    // MARK: Connecting

    private func connect() {
        guard !isStopped else { return }
        let generation = self.generation
        let link = NIOLoopBound(self, eventLoop: eventLoop)
        ClientBootstrap(group: eventLoop)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(DaemonLinkHandler(link: link, generation: generation))
                }
            }
            .connect(unixDomainSocketPath: socketPath)
            .assumeIsolated()
            .whenComplete { [self] result in
                guard generation == self.generation else {
                    if case .success(let channel) = result { channel.close(promise: nil) }
                    return
                }
                switch result {
                case .success(let channel):
                    self.channel = channel
                case .failure(let error):
                    failed("cannot reach the daemon at \(socketPath): \(error)")
                }
            }
    }

    /// Stops reading the daemon's frames after the one in hand, until ``resumeReading()``.
    package func pauseReading() {
        isReadingPaused = true
    }

    /// Reads the daemon's frames again: those that came while paused first.
    package func resumeReading() {
        guard isReadingPaused else { return }
        isReadingPaused = false
        resumeHandler?()
    }

    /// A frame from the daemon, on connection `generation`.
    fileprivate func receive(_ frame: ServerFrame, generation: UInt64) {
        guard generation == self.generation else { return }
        switch frame {
        case .hello(let greeting):
            guard greeting.version >= 5 else {
                return failed("the daemon at \(socketPath) speaks protocol \(greeting.version); the fleet service needs 5 (notifyd of the same release)")
            }
            isLinked = true
            limits = greeting.limits
            send(Request(.follow(exportPatterns)))
            // Said once the daemon took FOLLOW: from then on every export reaches this service.
            _ = sync().assumeIsolated().map { [self] in
                guard generation == self.generation else { return }
                retryDelay = Self.firstRetryDelay
                failedAttempts = 0
                logger.log(.daemonLinked, .notice, "following the daemon at \(socketPath): exports \(exportPatterns.map(\.text).joined(separator: " "))")
                onLinked?()
            }
        case .export(let export):
            onExport?(export)
        case .pong(let id?):
            pings.removeValue(forKey: id)?.succeed(())
        case .dropped(let notice):
            exportsDropped = exportsDropped.addingReportingOverflow(notice.count).overflow ? .max : exportsDropped + notice.count
            logger.log(
                .daemonLinkProblem,
                .warning,
                "the daemon dropped \(notice.count) exports of \(notice.topic) because this service did not read them in time; they do not reach other hosts (\(exportsDropped) so far)"
            )
        case .error(let error) where error.code == .notPermitted:
            failed("the daemon refuses this service: \(error.message); set fleet-user in its notifyd.conf to this service's user (uid \(getuid())), or run this service as that user")
        case .error(let error):
            importsRefused += 1
            if importsRefused == 1 || importsRefused % 1_000 == 0 {
                logger.log(.natsProblem, .warning, "\(error.message): not taken in (\(importsRefused) refused by the daemon so far)")
            }
        default:
            break
        }
    }

    /// The connection `generation` ended.
    fileprivate func closed(generation: UInt64) {
        guard generation == self.generation else { return }
        failed("lost the daemon at \(socketPath)")
    }

    /// The link is down: says why (the first failure of a run, then every hundredth), lets go of the connection, and
    /// tries again after a delay that doubles up to ``longestRetryDelay``.
    private func failed(_ reason: String) {
        let wasLinked = isLinked
        generation += 1
        isLinked = false
        isReadingPaused = false
        resumeHandler = nil
        // Imports that never reached the daemon's socket: counted, and announced to its subscribers once the link is
        // back, unless the fleet's log brings them again (read from where the daemon last confirmed).
        let lost = pendingImports + unwrittenImports
        importsNotSent += lost
        if !redeliversLostImports { unannounced += lost }
        pending.clear()
        unwritten = 0
        pendingImports = 0
        unwrittenImports = 0
        failPings()
        channel?.close(promise: nil)
        channel = nil
        guard !isStopped else { return }
        failedAttempts += 1
        if wasLinked || failedAttempts == 1 || failedAttempts % 100 == 0 {
            logger.log(.daemonLinkProblem, .warning, "\(reason); other hosts' messages wait in NATS, exports are not read; trying again")
        }
        if wasLinked { onLost?() }
        let delay = retryDelay
        retryDelay = min(retryDelay * 2, Self.longestRetryDelay)
        eventLoop.assumeIsolated().scheduleTask(in: delay) { [self] in connect() }
    }

    private func failPings() {
        let waiting = pings
        pings.removeAll()
        for (_, promise) in waiting { promise.fail(DaemonLinkError("the link to the daemon was lost")) }
    }
}

/// The link is down, or was lost before an answer came.
package struct DaemonLinkError: Error, CustomStringConvertible {
    package let description: String
    init(_ description: String) { self.description = description }
}

/// Reads the daemon's frames and hands each to the link. Read here, in a loop over each read's bytes, as the
/// client library does, rather than by a `ByteToMessageHandler` in front: that passes each frame on as an `NIOAny`
/// (boxed on the heap), which cost more than reading it on a link that carries every export.
private final class DaemonLinkHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    let link: NIOLoopBound<DaemonLink>
    let generation: UInt64
    private var decoder = ServerFrameDecoder()
    /// The start of a frame that has not all come.
    private var unread: ByteBuffer?

    init(link: NIOLoopBound<DaemonLink>, generation: UInt64) {
        self.link = link
        self.generation = generation
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let generation = self.generation
        guard link.value.generation == generation else { return }
        link.value.resumeHandler = { [weak self] in
            guard let self, link.value.generation == generation else { return }
            context.channel.setOption(ChannelOptions.autoRead, value: true).whenComplete { _ in }
            readKept(context: context)
            if !link.value.isReadingPaused { context.read() }
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        if var kept = unread.take() {
            kept.writeBuffer(&buffer)
            buffer = kept
        }
        unread = buffer
        // Paused, what comes is kept unread (a read already under way brings a few buffers more, no further).
        guard !link.value.isReadingPaused else { return }
        readKept(context: context)
    }

    /// Hands the link each whole frame kept, until it pauses.
    private func readKept(context: ChannelHandlerContext) {
        guard var buffer = unread.take() else { return }
        do {
            while context.channel.isActive, !link.value.isReadingPaused, let frame = try decoder.decode(buffer: &buffer) {
                link.value.receive(frame, generation: generation)
            }
        } catch {
            context.close(promise: nil)
            return
        }
        if link.value.isReadingPaused {
            context.channel.setOption(ChannelOptions.autoRead, value: false).whenComplete { _ in }
        }
        guard buffer.readableBytes > 0 else { return }
        // Bounded by the decoder (it refuses a frame larger than any the daemon sends).
        unread = buffer.keptForNextRead(allocator: context.channel.allocator)
    }

    func channelInactive(context: ChannelHandlerContext) {
        link.value.closed(generation: generation)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
