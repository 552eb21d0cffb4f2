internal import DequeModule
import NIOCore
import NotifyProtocol

/// Everything sent to connections: replies, deliveries and the buffered messages `SUB … latest` replays. A frame
/// goes to the connection when it takes it (as part of its span of the shared batch, unless it is a large reply or
/// replay, or the batch is full: then on its own, after the span), else into its bounded ``OutboundQueue``; what
/// waits, in the queue or in the connection's write buffer, counts against the uid's budget and the daemon's.
/// ``flush()`` sends it all once per batch.
extension Broker {
    /// Sends every frame queued since the last flush, one flush per connection, and closes the connections that
    /// asked for it. Ends the batch: the next publish reads the clock again (``PublishClock/endBatch()``).
    public func flush() {
        defer { clock.endBatch() }
        // First: closing a connection carries out the publishes it held back, which belong to this batch (its
        // histories settled, its log written, its frames sent, before the batch's buffer is let go of).
        closeDisconnected()
        settleHistory()
        // The log is written before any of the batch's frames leave, even with sync=never and no acknowledgement
        // waiting: what a subscriber is sent must survive a kill -9 of the daemon, or a restart would number
        // another message as one it saw, and the history it resumes from would lack one it was sent.
        settleAcknowledgements(commitState())
        // A sync made in place (no descriptor to spare for the syncer) carries out what its connections held back,
        // which writes records of its own: they are committed in this flush too. Each round takes held requests, so
        // the rounds end.
        while !sessionsAwaitingCommit.isEmpty { settleAcknowledgements(commitState()) }
        // A transport's flush can make its connection writable again, and what that sets off (held-back requests
        // carried out, a nested flush) writes to sessions of this list: so every span goes out and every mark is
        // cleared before the first transport flush (a session written to from then on is marked again, and its span
        // is not left in a batch a nested flush restarts), and the loop runs until nothing new was marked.
        while !sessionsToFlush.isEmpty {
            for session in sessionsToFlush { writeSpan(of: session) }
            // What the histories (and buffered messages) of this batch still take from its buffer, first.
            settleHistory()
            if !batch.isEmpty { batch.restart(allocator: allocator) }
            let sessions = sessionsToFlush
            sessionsToFlush.removeAll(keepingCapacity: true)
            for session in sessions { session.hasUnflushedFrames = false }
            for session in sessions { flushTransport(of: session) }
        }
        if !accountsReplayedTo.isEmpty { releaseReplayedBytes() }
    }

    /// Counts the history the batch replayed off its uids' queued bytes: the flush just counted what their
    /// connections' write buffers hold in its place.
    private func releaseReplayedBytes() {
        let accounts = accountsReplayedTo
        accountsReplayedTo.removeAll(keepingCapacity: true)
        for account in accounts {
            account.queuedBytes -= account.replayedBytes
            counters.queuedBytes -= account.replayedBytes
            account.replayedBytes = 0
            forgetIfEmpty(account)
        }
    }

    private func flushTransport(of session: Session) {
        if session.droppedSinceReport > 0 {
            onEvent?(.dropped(count: session.droppedSinceReport, for: session.peer))
            session.droppedSinceReport = 0
        }
        guard let transport = session.transport else { return }
        transport.flush()
        chargeWriteBuffer(of: session, transport.bufferedBytes)
        // A replay queued for its uid's budget rather than for its own connection, which takes frames: it goes now,
        // as no event of its connection would come to say so. (Queued frames are the queue's own copies, not the
        // batch's, and draining carries out no request: nothing here touches the batch this flush is ending.)
        if !session.outboxIsEmpty, transport.isWritable, !writeBufferIsOverBudget(session) {
            drainOutbox(of: session, into: transport)
        }
        if session.closesAfterFlush {
            transport.close()
            close(session)
        }
    }

    /// Sends a reply (or greeting): to the connection (``send(_:to:_:)``), or behind what is queued for it. While the
    /// session pauses its deliveries, a reply passes the live deliveries queued (see ``OutboundQueue``).
    func queue(_ frame: ByteBuffer, to session: Session) {
        guard let transport = session.transport else { return }
        if takesFlowingFrame(session, transport) {
            send(frame, to: session, transport)
        } else {
            writeSpan(of: session)
            changingOutbox(of: session) { $0.appendReply(frame) }
        }
        markForFlush(session)
    }

    /// The largest frame added to a connection's span of the batch rather than written on its own.
    static let spanFrameLimit = 4 << 10

    /// Sends a frame written for one connection (a reply, a replayed message) that it takes now: a small one joins
    /// its span of the batch, so that a run of them is one write at the flush.
    ///
    /// Each write the connection's write buffer holds costs NIO about 50 bytes of its ring of pending writes beside
    /// the frame's own buffer, and that ring never shrinks; the write buffer's limit counts bytes only. A client that
    /// pipelined four million `PING`s without reading made the daemon hold 627 MiB for 20 MB of `PONG`s
    /// (`Benchmarks/UnreadReplies/run.sh`).
    func send(_ frame: ByteBuffer, to session: Session, _ transport: any SessionTransport) {
        // The batch starts over only where a publish or the flush can let histories take their frames first; when
        // it is full, a frame goes on its own.
        guard frame.readableBytes <= Self.spanFrameLimit, batch.hasRoom(for: frame.readableBytes) else {
            writeSpan(of: session)
            transport.write(frame)
            return
        }
        let range = batch.append { $0.writeImmutableBuffer(frame) }
        if continuesSpan(range, of: session) {
            session.span = session.span.lowerBound..<range.upperBound
        } else {
            startSpan(range, of: session)
        }
    }

    /// Whether `range` of the batch follows straight on `session`'s span of it.
    @inline(__always)
    func continuesSpan(_ range: Range<Int>, of session: Session) -> Bool {
        session.spanGeneration == batch.generation && !session.span.isEmpty && session.span.upperBound == range.lowerBound
    }

    /// Writes `session`'s span, if it has one, and starts another at `range` of the batch.
    @inline(__always)
    func startSpan(_ range: Range<Int>, of session: Session) {
        writeSpan(of: session)
        session.span = range
        session.spanGeneration = batch.generation
    }

    /// Whether a frame that flows while deliveries are paused (a reply, a buffered message `SUB … latest` brings)
    /// may be written to `session` now, ahead of nothing it must follow.
    func takesFlowingFrame(_ session: Session, _ transport: any SessionTransport) -> Bool {
        guard transport.isWritable, !session.awaitsCommit else { return false }
        return session.outboxIsEmpty || (session.pausesDeliveries && !session.outboxHasFlowingEntries)
    }

    /// Sends a delivery of this batch: added to the session's span when the connection takes it, else copied into
    /// its bounded queue.
    func deliver(
        _ frame: Range<Int>,
        of state: TopicState,
        sequence: UInt64,
        payloadSize: Int,
        to session: Session,
        overflow: OverflowPolicy,
        isExport: Bool = false
    ) {
        guard session.hasTransport else { return }
        let takesIt: Bool
        if continuesSpan(frame, of: session) {
            // The next of a run to this connection in this batch: it took the run's first frame (a delivery, or a
            // reply that asked it), and nothing was written to it since (a write ends the run), so its transport is
            // not asked again (that counts a reference to it).
            takesIt = session.takesDeliveries && !writeBufferIsOverBudget(session)
            if takesIt { session.span = session.span.lowerBound..<frame.upperBound }
        } else {
            takesIt = session.transportIsWritable && session.takesDeliveries && !writeBufferIsOverBudget(session)
            if takesIt { startSpan(frame, of: session) }
        }
        markForFlush(session)
        if takesIt {
            // The fleet's copy is not a delivery of the topic's: the counters are what subscribers got.
            if isExport { return }
            state.delivered += 1
            counters.messagesOut += 1
            counters.bytesOut += UInt64(payloadSize)
            return
        }
        let target = SubscriberTarget(session: session, overflow: overflow)
        batch.withBytes(frame) { enqueue($0, of: state, sequence: sequence, payloadSize: payloadSize, to: target) }
    }

    /// Sends a buffered message that a `SUB … latest` brings: straight to the connection when it takes it, else into
    /// its bounded queue. Asked for, it flows while live deliveries are paused, as the `OK` after it does.
    func replay(_ frame: ByteBuffer, of state: TopicState, sequence: UInt64, payloadSize: Int, to target: SubscriberTarget) {
        let session = target.session
        guard let transport = session.transport else { return }
        markForFlush(session)
        if takesFlowingFrame(session, transport), !wouldPassBudget(session, adding: frame.readableBytes) {
            send(frame, to: session, transport)
            // Counted now, not at the flush: a resume of many topics writes far more in one batch than deliveries
            // do, and the uid's next connection resuming in the same batch must find its budget spent. The flush
            // counts what the write buffer holds in its place.
            let account = session.account
            if account.replayedBytes == 0 { accountsReplayedTo.append(account) }
            account.replayedBytes += frame.readableBytes
            account.queuedBytes += frame.readableBytes
            counters.queuedBytes += frame.readableBytes
            state.delivered += 1
            counters.messagesOut += 1
            counters.bytesOut += UInt64(payloadSize)
            return
        }
        writeSpan(of: session)
        frame.withUnsafeReadableBytes {
            enqueue($0, of: state, sequence: sequence, payloadSize: payloadSize, to: target, isReplay: true)
        }
    }

    /// Writes the session's span of this batch to its connection, if it has one.
    func writeSpan(of session: Session) {
        guard session.spanGeneration == batch.generation, !session.span.isEmpty else { return }
        let frames = batch.frame(session.span, allocator: allocator)
        session.span = 0..<0
        session.transport?.write(frames)
    }

    /// Queues a delivery for a connection that does not take it now; its subscription's overflow policy makes room
    /// (or disconnects it).
    func enqueue(
        _ frame: UnsafeRawBufferPointer,
        of state: TopicState,
        sequence: UInt64,
        payloadSize: Int,
        to target: SubscriberTarget,
        isReplay: Bool = false
    ) {
        let session = target.session
        // Not the transport itself: copying an existential out of the session costs a retain and a release, for
        // every message queued for a subscriber behind.
        guard session.hasTransport else { return }
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
            if let transport = session.transport {
                session.detachTransport()
                disconnecting.append((session, transport))
            }
            return
        }
        if dropped > 0 {
            counters.dropped += UInt64(dropped)
            // Reported once per batch: a subscriber that never reads drops a message for every one published.
            session.droppedSinceReport += dropped
        }
    }

    /// Counts what the session's connection holds in its write buffer in its uid's queued bytes, and the daemon's,
    /// in place of what it held before.
    func chargeWriteBuffer(of session: Session, _ bytes: Int) {
        let delta = bytes - session.writeBufferCharge
        guard delta != 0 else { return }
        session.writeBufferCharge = bytes
        session.account.queuedBytes += delta
        counters.queuedBytes += delta
    }

    /// Whether a connection that holds frames in its write buffer already must take no more there: its uid, or the
    /// daemon, has as many bytes waiting as its budget allows. Its deliveries then go to its queue, whose overflow
    /// policy makes room. A connection that takes all it is sent holds nothing there, and is never held up.
    func writeBufferIsOverBudget(_ session: Session) -> Bool {
        session.writeBufferCharge > 0
            && (session.account.queuedBytes >= configuration.maxQueuedBytesPerUser || counters.queuedBytes >= configuration.maxQueuedBytesTotal)
    }

    /// Whether `bytes` more waiting for `session`'s connection would take its uid, or the daemon, past its budget of
    /// queued bytes: a replay that would is queued instead, where the subscription's overflow policy makes room and
    /// announces what it drops.
    func wouldPassBudget(_ session: Session, adding bytes: Int) -> Bool {
        session.account.queuedBytes + bytes > configuration.maxQueuedBytesPerUser
            || counters.queuedBytes + bytes > configuration.maxQueuedBytesTotal
    }

    /// Takes note that the session's connection took bytes from its write buffer without a flush (see
    /// ``SessionTransport/bufferedBytes``): they no longer count against its uid, and what waited in its queue for
    /// that room goes out.
    public func writeBufferChanged(_ session: Session) {
        guard let transport = session.transport else { return }
        chargeWriteBuffer(of: session, transport.bufferedBytes)
        writabilityChanged(session)
    }

    /// Takes note that a session's transport changed its ``SessionTransport/isWritable``, either way: its owner calls
    /// this whenever it does (per request and per delivery, the broker reads what it was last told, not the
    /// transport; an owner that reports only the turn back to writable leaves it believing a full connection takes
    /// frames). Once the connection takes frames again, drains the session's queue into it, then carries out the
    /// requests held back meanwhile, for as long as it keeps taking their replies.
    public func writabilityChanged(_ session: Session) {
        session.noteTransportWritability()
        guard let transport = session.transport, transport.isWritable else { return }
        writeSpan(of: session)
        drainOutbox(of: session, into: transport)
        carryOutHeldBack(of: session)
    }

    /// Carries out the requests a session held back, in order, while its connection takes their replies and no
    /// acknowledgement of it waits for the state log's sync.
    func carryOutHeldBack(of session: Session) {
        while let transport = session.transport, transport.isWritable, !session.waitsForSync, !writeBufferIsOverBudget(session),
            let request = session.heldBack.popFirst()
        {
            carryOut(request, from: session)
        }
    }

    /// Writes what the session's queue holds while its connection takes it: everything, or while its deliveries
    /// are paused, only the replies that may pass them.
    func drainOutbox(of session: Session, into transport: any SessionTransport) {
        // Acknowledgements waiting for the batch's commit go out with everything behind them once it is done.
        guard !session.awaitsCommit else { return }
        let (messages, payloadBytes): (Int, Int)
        if session.pausesDeliveries {
            guard session.outboxHasFlowingEntries else { return }
            (messages, payloadBytes) = changingOutbox(of: session) { $0.drainFlowing(into: transport) }
        } else {
            guard !session.outboxIsEmpty else { return }
            (messages, payloadBytes) = changingOutbox(of: session) { $0.drain(into: transport) }
        }
        counters.messagesOut += UInt64(messages)
        counters.bytesOut += UInt64(payloadBytes)
        markForFlush(session)
    }

    /// Changes the session's queue, and counts what that changed in the bytes queued for its uid and in total.
    func changingOutbox<Result>(of session: Session, _ change: (inout OutboundQueue) -> Result) -> Result {
        let before = session.outbox.byteCount
        let result = change(&session.outbox)
        let delta = session.outbox.byteCount - before
        session.account.queuedBytes += delta
        counters.queuedBytes += delta
        return result
    }

    /// Lets go of what the session's queue holds, and of the queue.
    func discardOutbox(of session: Session) {
        guard session.hasOutboxStorage else { return }
        changingOutbox(of: session) { $0 = OutboundQueue() }
        session.releaseOutbox()
    }

    func markForFlush(_ session: Session) {
        if !session.hasUnflushedFrames {
            session.hasUnflushedFrames = true
            sessionsToFlush.append(session)
        }
    }

    func replyOK(_ id: UInt64?, value: UInt64? = nil, to session: Session) {
        var reply = allocator.buffer(capacity: 32)
        reply.writeOK(requestID: id, value: value)
        queue(reply, to: session)
    }

    /// Answers `error` and reports it as an event.
    func refuse(_ error: ProtocolError, subject: String?, to session: Session) {
        if session.isImporter { fleet.lastImportRefusal = error }
        reply(error, to: session)
        onEvent?(.refused(error, subject: subject, by: session.peer))
    }

    func reply(_ error: ProtocolError, to session: Session) {
        var reply = allocator.buffer(capacity: error.message.utf8.count + 40)
        reply.writeError(error)
        queue(reply, to: session)
    }
}
