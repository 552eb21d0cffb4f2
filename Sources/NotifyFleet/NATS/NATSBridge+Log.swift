import Logging
import NATSClient
import NIOCore
import NotifyProtocol

/// The log's two halves: exports appended to it (a record per outbox chunk, confirmed by its acknowledgement), and
/// reads of it (catch-up after an absence, repair of a gap), with where this host stands kept in its state file.
extension NATSBridge {
    /// How long a repair waits for the log to bring what a live message says is missing: its origin appends the
    /// record within milliseconds, or seconds while its server changes; past this, what waited is taken in as it is.
    static let repairPatience = TimeAmount.seconds(5)
    static let headPatience = TimeAmount.seconds(2)

    // MARK: Appending

    /// Subscribes to the acknowledgements of this connection's records.
    func subscribeAcknowledgements(over connection: NATSConnection, generation: UInt64) {
        connection.subscribe(to: ownLog.acknowledgements) { [weak self] reply in
            guard let self, generation == self.generation else { return }
            acknowledged(reply, connection: connection)
        }
    }

    /// Writes the record of outbox chunk `number`: the chunk itself as one message of `<prefix>_log.<host>`, its
    /// acknowledgement asked for at `<inbox>.<number>`.
    func writeRecord(_ chunk: ByteBuffer, number: UInt64, over connection: NATSConnection) {
        connection.write(ownLog.recordLine(number: number, size: chunk.readableBytes))
        connection.write(chunk)
        connection.write(ByteBuffer(staticString: "\r\n"))
    }

    /// A record's acknowledgement: its chunk is let go of once every one before it is. An error (the stream lost its
    /// leader, no stream for the subject) means the record may not be stored: the connection is let go of, and what
    /// is unconfirmed goes again on the next.
    func acknowledged(_ reply: NATSMessage, connection: NATSConnection) {
        guard let number = OwnLog.recordNumber(acknowledgedAt: reply.subject) else { return }
        let json = String(buffer: reply.payload)
        guard reply.headers?.status == nil, !json.contains(#""error""#), let sequence = JSONScan.integer("seq", in: json), sequence > 0,
            JSONScan.string("stream", in: json) == JetStreamLog.streamName(prefix: settings.prefix, suffix: "_log")
        else {
            counts.logRefusals += 1
            logger.log(
                .natsProblem,
                .warning,
                "NATS did not store a record of this host's log (\(reply.headers?.status.map { "status \($0)" } ?? json)): reconnecting, and sending what it held again"
            )
            connection.closeNow()
            return
        }
        ownLog.acknowledgementWaitStarts()
        encoder.logSequence = max(encoder.logSequence, UInt64(sequence))
        outbox.acknowledge(number)
        scheduleHead()
        retryWaitingExport()
    }

    /// Writes this host's head (the last export number its log acknowledged) within ``OwnLog/headInterval``, if it
    /// says less and no write is due already: one stored message per interval, however many records.
    func scheduleHead() {
        guard ownLog.headWriteIsDue(acknowledged: outbox.confirmedTag) else { return }
        eventLoop.assumeIsolated().scheduleTask(in: OwnLog.headInterval) { [weak self] in
            guard let self else { return }
            ownLog.scheduledHeadWriteRuns()
            writeHead()
        }
    }

    func writeHead() {
        guard let connection, sequencing, let head = ownLog.head(epoch: encoder.epoch, acknowledged: outbox.confirmedTag) else { return }
        connection.sendNow([.publish(subject: ownLog.headSubject, replyTo: nil, headers: nil, payload: ByteBuffer(string: head.description))])
    }

    /// Subscribes to the other hosts' heads as they are written: a head past where this host stands is a gap the
    /// live path did not show (its last messages lost, say, with nothing after them), read from the log at once.
    func subscribeHeads(over connection: NATSConnection, generation: UInt64) {
        let log = JetStreamLog(settings: settings)
        let root = log.headSubject(of: "")
        connection.subscribe(to: root + ">") { [weak self] message in
            guard let self, generation == self.generation, message.payload.readableBytes <= 64 else { return }
            let host = String(message.subject.utf8.dropFirst(root.utf8.count)) ?? ""
            guard host != settings.hostName, FleetImport.isValidHostName(host), let head = ExportStamp(String(buffer: message.payload)) else { return }
            if let from = sequencer.expect(host, through: head) { startRead(of: host, after: from) }
        }
    }

    // MARK: Reading

    /// Starts reading every origin's part of the log from where this host stands; the future succeeds once the read
    /// reaches the log's end. A first start (nothing known) starts at the end: a host new to the fleet takes in what
    /// comes next.
    func startCatchUp(
        _ log: JetStreamLog,
        bounds: (first: UInt64, last: UInt64),
        over connection: NATSConnection,
        generation: UInt64
    ) -> EventLoopFuture<Void> {
        // A retry of the latest messages: it runs already.
        if let running = logReads.catchUpDone { return running.futureResult }
        let promise = eventLoop.makePromise(of: Void.self)
        var start = sequencer.catchUpStart ?? positions.start ?? bounds.last
        if start > bounds.last {
            // The log was made anew since: everything in it is newer than where this host stood.
            logger.log(.natsProblem, .notice, "NATS stream \(log.streamName) is newer than this host's positions in it: reading all of it")
            sequencer.restore(sequencer.positions.mapValues { var position = $0; position.logSequence = 0; return position })
            sequencer.beginCatchUp()
            start = 0
        }
        let read = logReads.beginCatchUp(after: start, through: bounds.last, forwarded: counts.forwarded, done: promise)
        request(read, over: connection, generation: generation)
        return promise.futureResult
    }

    /// Starts reading `host`'s part of the log after stream sequence `sequence`: a live message of its waits.
    func startRead(of host: String, after sequence: UInt64) {
        guard let connection, let read = logReads.beginRepair(of: host, after: sequence) else { return }
        counts.repairs += 1
        request(read, over: connection, generation: generation)
    }

    fileprivate func request(_ read: LogRead, over connection: NATSConnection, generation: UInt64) {
        let log = JetStreamLog(settings: settings)
        let subject = read.host.map(log.subject(of:)) ?? log.allSubjects
        let next = read.next
        let bridge = NIOLoopBound(self, eventLoop: eventLoop)
        let boundRead = NIOLoopBound(read, eventLoop: eventLoop)
        let eventLoop = self.eventLoop
        Task {
            let result: Result<JetStreamLog.Record?, any Error>
            do {
                result = .success(try await log.record(from: next, subject: subject, over: connection))
            } catch {
                result = .failure(error)
            }
            eventLoop.execute { bridge.value.received(result, for: boundRead.value, log: log, over: connection, generation: generation) }
        }
    }

    private func received(
        _ result: Result<JetStreamLog.Record?, any Error>,
        for read: LogRead,
        log: JetStreamLog,
        over connection: NATSConnection,
        generation: UInt64
    ) {
        guard generation == self.generation, logReads.isCurrent(read) else { return }
        let record: JetStreamLog.Record
        switch result {
        case .success(let found?):
            record = found
        case .success(nil):
            endReached(read, over: connection, generation: generation)
            return
        case .failure(let error):
            failed(read, error, log: log, over: connection, generation: generation)
            return
        }
        read.answered()
        // A record older than asked for, or of a subject not the log's, is not taken.
        guard record.sequence >= read.next, let host = log.host(of: record.subject) else {
            failed(read, NATSError("the log answered with a record not asked for"), log: log, over: connection, generation: generation)
            return
        }
        read.next = record.sequence + 1
        counts.recordsRead += 1
        if host != settings.hostName, FleetImport.isValidHostName(host), read.host == nil || read.host == host {
            take(record: record.sequence, of: host, payload: record.payload, read: read)
        }
        if read.host == nil {
            logReads.catchUpRead(through: record.sequence)
        } else if !sequencer.needsMore(host) {
            logReads.end(read)
            return
        }
        request(read, over: connection, generation: generation)
    }

    /// Takes in what a record holds that this host lacks, with the live messages that waited for it.
    private func take(record sequence: UInt64, of host: String, payload: ByteBuffer, read: LogRead) {
        let subjectPrefix = settings.prefix + "."
        var entries: [(message: NATSMessage, stamp: ExportStamp?)] = []
        let parsed = LogRecord.forEachMessage(in: payload, under: subjectPrefix) { message in
            let provenance = Provenance(headers: message.headers)
            // A record holds its origin's messages only: one claiming another host is no export of it.
            entries.append((message, provenance.host == host ? provenance.export : nil))
        }
        if !parsed { counts.recordsMalformed += 1 }
        let applied = sequencer.apply(record: sequence, of: host, entries: entries)
        if applied.missed > 0 { noteMissed(applied.missed, of: host) }
        guard !applied.take.isEmpty else { return }
        read.broughtSomething()
        let before = counts.forwarded
        for message in applied.take { receive(message, subjectPrefix: subjectPrefix, replayed: false, fromStream: true) }
        if read.host == nil { counts.caughtUp += counts.forwarded - before } else { counts.repaired += counts.forwarded - before }
        schedulePositionSync()
    }

    /// No record at or after the one asked for: catch-up is done; a repair waits for the record on its way, a
    /// little, then takes what waited as it is.
    private func endReached(_ read: LogRead, over connection: NATSConnection, generation: UInt64) {
        guard let host = read.host else {
            logReads.end(read)
            positions.start = read.next - 1
            let (take, repairs) = sequencer.endCatchUp(through: read.next - 1)
            for message in take { receive(message, subjectPrefix: settings.prefix + ".", replayed: false, fromStream: true) }
            for (host, from) in repairs { startRead(of: host, after: from) }
            schedulePositionSync()
            logger.log(
                .natsConnected,
                .notice,
                "caught up with NATS stream \(JetStreamLog(settings: settings).streamName): \(counts.forwarded - logReads.forwardedBeforeCatchUp) messages of other hosts handed to the daemon"
            )
            checkHeads(over: connection, generation: generation)
            return
        }
        guard sequencer.needsMore(host) else {
            logReads.end(read)
            return
        }
        // A head is written once the log holds what it says, so what is missing then is gone; the short patience
        // is for a leader just elected that has not applied all it holds.
        let patience = sequencer.waitsOnlyForHead(host) ? Self.headPatience : Self.repairPatience
        if read.hasWaited(patience) {
            guard let gapEnd = sequencer.gapEnd(host) else {
                logReads.end(read)
                settle(host)
                return
            }
            // The log holds later records of the origin's but not the gap's: gone for good only if the origin's
            // head says its log held them; else they are on their way (its server changed, and it sends them again).
            read.waitAgain()
            checkGap(of: host, before: gapEnd, read: read, over: connection, generation: generation)
            return
        }
        // Its record may be on its way (appended a few milliseconds after the live message): ask again soon.
        eventLoop.assumeIsolated().scheduleTask(in: read.nextPollDelay()) { [weak self] in
            guard let self, generation == self.generation, logReads.isCurrent(read) else { return }
            request(read, over: connection, generation: generation)
        }
    }

    /// Ends `host`'s read without the log bringing all it waited for: what it brought after a gap is taken in, the
    /// gap and what its head said the log held are announced as missed, and the live messages that waited are let
    /// go of (the log never showed them).
    fileprivate func settle(_ host: String) {
        let waiting = sequencer.unconfirmed
        let (released, missed) = sequencer.giveUpCounting(host)
        if missed > 0 { noteMissed(missed, of: host) }
        noteUnconfirmed(Int(sequencer.unconfirmed - waiting), of: host)
        let before = counts.forwarded
        for message in released { receive(message, subjectPrefix: settings.prefix + ".", replayed: false, fromStream: true) }
        counts.repaired += counts.forwarded - before
        schedulePositionSync()
    }

    /// After catch-up: each known origin's head, against where this host stands. An origin whose head is past it
    /// gets a read of its log from there, and what the log no longer holds is announced; catch-up is done once
    /// those reads are.
    private func checkHeads(over connection: NATSConnection, generation: UInt64) {
        let log = JetStreamLog(settings: settings)
        let known = Set(sequencer.positions.keys)
        let ownName = settings.hostName
        let bridge = NIOLoopBound(self, eventLoop: eventLoop)
        let eventLoop = self.eventLoop
        Task {
            var heads: [(String, ExportStamp)] = []
            let listed = (try? await log.hostsWithHeads(over: connection)) ?? []
            for host in known.union(listed).sorted() where host != ownName && FleetImport.isValidHostName(host) {
                if let head = try? await log.head(of: host, over: connection) { heads.append((host, head)) }
            }
            let found = heads
            eventLoop.execute {
                let bridge = bridge.value
                guard generation == bridge.generation else { return }
                bridge.apply(heads: found)
                bridge.whenReadsEnd(before: .now() + .seconds(10), generation: generation)
            }
        }
    }

    /// On this host's first join, every origin's head is where it starts (what came before is not its to take in);
    /// later, a head past where this host stands means a read of that origin's log, and the announcement of what
    /// it no longer holds: an origin this host never met started while it was away.
    private func apply(heads: [(String, ExportStamp)]) {
        for (host, head) in heads {
            if sequencer.position(of: host) == nil {
                guard sequencer.begin(host, at: positions.firstPosition(at: head)) else { continue }
            }
            if let from = sequencer.expect(host, through: head) { startRead(of: host, after: from) }
        }
        positions.joined()
        schedulePositionSync()
    }

    /// Succeeds the catch-up once no read of the log is under way (or at `deadline`).
    private func whenReadsEnd(before deadline: NIODeadline, generation: UInt64) {
        guard generation == self.generation else { return }
        guard logReads.isEmpty || NIODeadline.now() >= deadline else {
            eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(10)) { [weak self] in
                self?.whenReadsEnd(before: deadline, generation: generation)
            }
            return
        }
        logReads.catchUpDone?.succeed(())
    }

    /// Asks `host`'s head whether the gap before `gapEnd` is final; settles it if so, else reads on.
    private func checkGap(of host: String, before gapEnd: ExportStamp, read: LogRead, over connection: NATSConnection, generation: UInt64) {
        let log = JetStreamLog(settings: settings)
        let bridge = NIOLoopBound(self, eventLoop: eventLoop)
        let boundRead = NIOLoopBound(read, eventLoop: eventLoop)
        let eventLoop = self.eventLoop
        Task {
            let head = try? await log.head(of: host, over: connection)
            eventLoop.execute {
                let bridge = bridge.value
                let read = boundRead.value
                guard generation == bridge.generation, bridge.logReads.isCurrent(read) else { return }
                let isFinal = head.map { $0.epoch > gapEnd.epoch || ($0.epoch == gapEnd.epoch && $0.number + 1 >= gapEnd.number) } ?? false
                if isFinal {
                    bridge.logReads.end(read)
                    bridge.settle(host)
                } else {
                    bridge.request(read, over: connection, generation: generation)
                }
            }
        }
    }

    /// A direct get failed (a timeout, a stream without direct gets, a server going away): tried again a little
    /// later; a catch-up that fails three times in a row goes on without the log.
    private func failed(_ read: LogRead, _ error: any Error, log: JetStreamLog, over connection: NATSConnection, generation: UInt64) {
        read.failed()
        logger.log(.natsProblem, read.failures == 1 ? .warning : .debug, "reading NATS stream \(log.streamName) failed (\(error)); trying again")
        if read.hasFailedTooOften, read.host == nil {
            withoutCatchUp(over: connection, because: "the log cannot be read: \(error)")
            logReads.catchUpDone?.succeed(())
            return
        }
        if read.hasFailedTooOften, let host = read.host {
            logReads.end(read)
            settle(host)
            return
        }
        eventLoop.assumeIsolated().scheduleTask(in: .seconds(1)) { [weak self] in
            guard let self, generation == self.generation, logReads.isCurrent(read) else { return }
            request(read, over: connection, generation: generation)
        }
    }

    /// Lets go of the reads of the log under way, of the catch-up waited for, and of the replays of the latest
    /// messages: the connection is being let go of.
    func stopReads() {
        let catchUp = logReads.stop()
        catchUp?.fail(NATSError("the connection was let go of"))
        let stopped = replays
        replays.removeAll()
        for replay in stopped { replay.fail(NATSError("the connection was let go of")) }
    }

    /// Messages of `host`'s the log no longer holds that this host never took in: its subscribers are told (a
    /// `DROP`), the journal says so, and `nats_catch_up_missed` counts them.
    func noteMissed(_ count: UInt64, of host: String) {
        let (sum, overflow) = counts.catchUpMissed.addingReportingOverflow(count)
        counts.catchUpMissed = overflow ? .max : sum
        link.send(Request(.announceMissed(count)))
        logger.log(
            .natsProblem,
            .warning,
            "\(count) messages of \(host) were gone from NATS stream \(JetStreamLog(settings: settings).streamName) before this host read them (older than catch-up = \(settings.catchUpSeconds) s, past catch-up-bytes, or lost with that host's fleet service): this host's subscribers were told of the drop",
            ["dropped": "\(count)", "origin": "\(host)"]
        )
    }

    /// Live messages the log never confirmed: counted, and said now and then (a forger's numbers, or an origin
    /// whose log cannot be written).
    func noteUnconfirmed(_ count: Int, of host: String) {
        guard ownLog.unconfirmedAreWorthLogging(count) else { return }
        logger.log(
            .natsProblem,
            .warning,
            "\(count) live messages from \(host) were not taken in: its log did not show them within \(Self.repairPatience.nanoseconds / 1_000_000_000) s (a forged export number, or a host whose log is not written yet, whose next message or head brings them from the log); where this host stands in \(host)'s messages did not move",
            ["origin": "\(host)"]
        )
    }

    // MARK: Where this host stands

    /// Asks the daemon to confirm what it was handed, then keeps the positions as of now as confirmed: at most one
    /// round every ``PositionKeeper/syncInterval``.
    func schedulePositionSync() {
        guard !positions.syncIsScheduled else { return }
        positions.syncIsScheduled = true
        eventLoop.assumeIsolated().scheduleTask(in: PositionKeeper.syncInterval) { [weak self] in
            guard let self else { return }
            positions.syncIsScheduled = false
            let snapshot = positions.snapshot(of: sequencer.positions)
            link.sync().assumeIsolated().whenSuccess { [weak self] in
                guard let self else { return }
                positions.confirm(snapshot)
                scheduleWritePositions()
            }
        }
    }

    /// Writes the confirmed positions to the state file, at most once every ``PositionKeeper/writeInterval``.
    func scheduleWritePositions() {
        guard positions.mayScheduleWrite else { return }
        positions.writeIsScheduled = true
        eventLoop.assumeIsolated().scheduleTask(in: PositionKeeper.writeInterval) { [weak self] in
            guard let self else { return }
            positions.writeIsScheduled = false
            writePositions()
        }
    }

    func writePositions() {
        do {
            try positions.write()
        } catch {
            logger.log(.natsProblem, .error, "where this host stands in the fleet's log cannot be kept: \(error); after a restart it would take in again what it has (the daemon drops repeats)")
        }
    }

    /// The daemon's link was lost: what it was handed and did not confirm may be lost with it, so this host stands
    /// where the daemon last confirmed, and reads the log from there once linked again.
    func fallBackToConfirmedPositions() {
        sequencer.restore(positions.fallBack())
    }
}
