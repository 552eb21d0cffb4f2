import Logging
import NATSClient
import NIOCore
import NotifyProtocol

/// The export path: the daemon's exports into the outbox, and the outbox to NATS as it takes them.
extension NATSBridge {
    /// Takes an export of the daemon's (which sends only what the patterns select and nobody may read there).
    func export(_ message: FleetExport) {
        let topic = message.delivery.topic
        // The daemon applies the patterns too; these are the ones of a reload it may not have taken yet.
        guard exports.contains(topic) else { return }
        // A message over the server's max_payload would make it close the connection, again at every resend; with
        // the log, its record (the operation itself, in a chunk of its own) must fit too.
        let size = encoder.prepare(message)
        let recordSize = sequencing ? size + 64 + settings.prefix.utf8.count + topic.name.utf8.count : size
        guard recordSize <= serverMaxPayload else {
            counts.tooLarge += 1
            if counts.tooLarge == 1 || counts.tooLarge % 1_000 == 0 {
                logger.log(
                    .natsOutboxOverflow,
                    .error,
                    "a message of \(topic) is not sent to other hosts: with its headers it is \(size) bytes, over the NATS server's max_payload (\(serverMaxPayload)); \(counts.tooLarge) so far",
                    ["topic": "\(topic)"]
                )
            }
            return
        }
        let number = encoder.numbers ? encoder.nextNumber : 0
        // While NATS takes what the outbox holds, room comes soon: an export that does not fit waits, and the
        // daemon's frames after it wait unread in its queue for this service (bounded there, and announced if it
        // drops them). Without a connection, nothing makes room: it is dropped and counted, as the outbox's bounds say.
        let mayWait = connection != nil && isReady && waitingExport == nil
        let uid = message.delivery.publisher.uid
        guard outbox.append(uid: uid, tag: number, countsRefusal: !mayWait, encode: { encoder.writeLive(message, into: &$0) }) else {
            if mayWait {
                waitingExport = message
                counts.exportsWaitedForRoom += 1
                link.pauseReading()
                return
            }
            reportOverflow(uid: uid)
            return
        }
        encoder.numberUsed()
        // The stream of latest messages gets the topic's newest of the window, not every one.
        if message.kind != .notRetained {
            latest.note(message)
            if latest.isFull { writeLatest() } else { scheduleLatest() }
        }
        if connection != nil { scheduleSend() }
    }

    /// Takes the export that waited for room in the outbox, now that some was made (or the connection that would make
    /// it was lost, when it is dropped if there is still none), and reads the daemon's frames again unless it waits
    /// still.
    func retryWaitingExport() {
        guard let waiting = waitingExport else { return }
        waitingExport = nil
        export(waiting)
        if waitingExport == nil { link.resumeReading() }
    }

    /// Ends the window of latest messages in ``latestWindow``, unless it is ending already.
    func scheduleLatest() {
        guard !latestIsScheduled else { return }
        latestIsScheduled = true
        eventLoop.assumeIsolated().scheduleTask(in: Self.latestWindow) { [weak self] in
            guard let self else { return }
            latestIsScheduled = false
            writeLatest()
        }
    }

    /// Puts the window's latest messages into the outbox, after the live messages before them, and sends.
    func writeLatest() {
        for message in latest.take() {
            _ = encoder.prepare(message, numbered: false)
            guard outbox.append(uid: message.delivery.publisher.uid, isMessage: false, encode: { encoder.writeLatest(message, into: &$0) }) else {
                reportOverflow(uid: message.delivery.publisher.uid)
                continue
            }
        }
        if connection != nil { scheduleSend() }
    }

    /// Sends what waits once the current batch of work is done: the batch's exports go out as one chunk, one write and
    /// one flush, not one per message.
    func scheduleSend() {
        guard !sendIsScheduled else { return }
        sendIsScheduled = true
        eventLoop.assumeIsolated().execute { [self] in
            sendIsScheduled = false
            guard drain(), let connection else { return }
            // With the log, each chunk is confirmed by its record's acknowledgement instead.
            guard !sequencing else {
                connection.flushWritten()
                return
            }
            let mark = outbox.sentThrough
            let generation = self.generation
            let confirmed = eventLoop.makePromise(of: Void.self)
            connection.flush(confirmed: confirmed)
            confirmed.futureResult.assumeIsolated().whenSuccess { [self] in
                guard generation == self.generation else { return }
                outbox.confirm(through: mark)
                retryWaitingExport()
            }
        }
    }

    /// Writes what waits while the connection takes it (without flushing); returns whether it wrote anything.
    @discardableResult
    func drain() -> Bool {
        guard let connection, isReady else { return false }
        var wrote = false
        let logged = sequencing
        // The wait for an acknowledgement starts with the first record outstanding.
        if logged, !outbox.hasUnconfirmedSent { ownLog.acknowledgementWaitStarts() }
        while connection.isWritable, let chunk = outbox.nextUnsent() {
            connection.write(chunk)
            if logged { writeRecord(chunk, number: outbox.lastSentNumber, over: connection) }
            wrote = true
        }
        return wrote
    }

    func reportOverflow(uid: UInt32) {
        // Once per 1,000 at most after the first: an outage under load must not flood the journal.
        let dropped = outbox.dropped
        guard dropped == 1 || dropped - overflowReported >= 1_000 else { return }
        overflowReported = dropped
        let full = outbox.lastRefusalWasShare
            ? "the NATS outbox is full for uid \(uid) (its messages hold their share of the outbox's \(outbox.limit) bytes)"
            : "the NATS outbox is full (\(outbox.bytes) of \(outbox.limit) bytes)"
        logger.log(
            .natsOutboxOverflow,
            .error,
            "\(full): \(dropped) messages not sent to other hosts so far, \(outbox.droppedOverShare) of them over their uid's share",
            ["dropped": "\(dropped)", "uid": "\(uid)"]
        )
    }
}
