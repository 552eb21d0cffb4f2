import NIOCore
import NotifyProtocol

/// The fleet service's requests (protocol 5; PROTOCOL.md, "The fleet service"): `FOLLOW` this host's publishes,
/// `IMPORT` other hosts' messages, `MISSED` to announce what was lost on the way, `FLEETSTATS` for `STATS`. Every
/// check on what another host claims is made here, where the request enters, whatever the fleet service checked.
extension Broker {
    /// Carries out a fleet request from `session`, which must be the fleet user's.
    func handleFleetRequest(_ request: Request, from session: Session) {
        guard let fleetUID = configuration.fleetUID, session.peer.uid == fleetUID else {
            let who = configuration.fleetUID.map { "uid \($0)" } ?? "no user (fleet-user is not set)"
            let sentence = "only the fleet service may follow, import or report here, and this daemon's fleet user is \(who)"
            return refuse(ProtocolError(.notPermitted, sentence, requestID: request.id), subject: nil, to: session)
        }
        switch request.command {
        case .follow(let patterns):
            fleet.follower = session
            fleet.exports = FleetTopics(patterns)
            replyOK(request.id, to: session)
        case .importMessage(let message):
            importFromFleet(message, id: request.id, from: session)
        case .announceMissed(let count):
            announceMissedImports(count: count)
            replyOK(request.id, to: session)
        case .fleetStats(let stats):
            // The daemon's own names win: a report cannot hide or fake one of them in `STATS`. The imports the
            // fleet service refused before sending them are added to those refused here.
            let own = Set(fleetCounters.map(\.name)).union(statistics.counters(now: clock.now()).counters.map(\.name))
            fleet.refusedByFleet = stats["nats_import_refused"] ?? 0
            fleet.reported = stats.counters.filter { !own.contains($0.name) }
            replyOK(request.id, to: session)
        default:
            preconditionFailure("not a fleet request")
        }
    }

    /// Publishes or clears here as another host did, after every check a local publish meets and those on what only
    /// a peer can claim. A repeat (a message taken in already, sent again) is skipped and counted; a refusal is
    /// answered `ERR`, naming the topic and the host, and counted.
    private func importFromFleet(_ message: FleetImport, id: UInt64?, from session: Session) {
        let importer: Session
        if let made = fleet.importer, !made.isClosed {
            importer = made
        } else {
            importer = openImporter(peer: FleetLink.nobody)
            fleet.importer = importer
        }
        let delivery = message.delivery
        let topic = delivery.topic
        let host = delivery.publisher.host ?? ""
        let sequence = delivery.sequence
        let time = delivery.time.microsecondsSinceEpoch
        let now = clock.now().microsecondsSinceEpoch
        func refused(_ why: String) {
            fleet.importRefused += 1
            reply(ProtocolError(.malformed, "IMPORT of \(topic.name) from \(host): \(why)", requestID: id), to: session)
        }
        // What this host took in before (its state log holds it) counts as taken: a message sent again is a repeat.
        if !fleet.filter.knows(topic), let newest = newestImported(of: topic) {
            fleet.filter.taken(topic: topic, host: newest.host, sequence: newest.sequence, time: newest.time, now: now)
        }
        switch fleet.filter.decide(topic: topic, host: host, sequence: sequence, time: time, now: now) {
        case .take: break
        case .repeated: return
        case .refused(let why): return refused(why)
        }
        if message.kind == .clear {
            if let refusal = clearImported(topic, at: time, replayed: message.replayed, through: importer) { return refused(refusal.message) }
            fleet.filter.taken(topic: topic, host: host, sequence: sequence, time: time, now: now)
            fleet.clearsImported += 1
            return
        }
        let imported = ImportedMessage(
            topic: topic,
            payload: delivery.payload,
            retain: message.kind == .retained,
            host: host,
            publisher: Publisher(uid: delivery.publisher.uid, pid: delivery.publisher.pid, unit: delivery.publisher.unit),
            sequence: sequence
        )
        if message.replayed && holdsAlready(imported) {
            fleet.filter.noteRepeat()
            return
        }
        switch publishImported(imported, through: importer) {
        case .published:
            fleet.filter.taken(topic: topic, host: host, sequence: sequence, time: time, now: now)
            fleet.imported += 1
        case .refused(let error):
            refused(error.message)
        }
    }

    /// Hands the fleet service a publish of this host's, `frame` in the batch being `state`'s message as
    /// subscribers get it: an `EXP` frame after it, delivered to the follower like a message, under its queue's
    /// bounds (what it does not read in time is dropped and announced to it, never held without bound).
    func exportToFleet(
        _ topic: Topic,
        of state: TopicState,
        payload: UnsafeRawBufferPointer,
        retain: Bool,
        sequence: UInt64,
        time: PublishTime,
        from session: Session,
        to follower: Session
    ) {
        guard exportIsSelected(topic) else { return }
        let frame = batch.append { Self.writeExport(retain ? .retained : .notRetained, topic, sequence, time, payload, by: session, into: &$0) }
        deliver(frame, of: state, sequence: sequence, payloadSize: payload.count, to: follower, overflow: .dropOldest, isExport: true)
    }

    /// Hands the fleet service a clear of `topic` by `session` (also when this host held nothing for it: the
    /// stream of latest messages keeps the clear, so no host takes the message back in).
    func exportClearToFleet(_ topic: Topic, sequence: UInt64, time: PublishTime, by session: Session, to follower: Session) {
        guard exportIsSelected(topic) else { return }
        var frame = allocator.buffer(capacity: ByteBuffer.maximumMessageFrameSize(topic: topic.name, unit: session.unitField, payloadSize: 0))
        Self.writeExport(.clear, topic, sequence, time, UnsafeRawBufferPointer(start: nil, count: 0), by: session, into: &frame)
        queue(frame, to: follower)
    }

    /// Writes the `EXP` frame of a publish or clear of `session`'s.
    private static func writeExport(
        _ kind: FleetMessageKind,
        _ topic: Topic,
        _ sequence: UInt64,
        _ time: PublishTime,
        _ payload: UnsafeRawBufferPointer,
        by session: Session,
        into buffer: inout ByteBuffer
    ) {
        var lineStart = 0
        buffer.writeMessageFrame(
            .export(kind),
            requestID: nil,
            topic: topic.name,
            sequence: sequence,
            time: time,
            uid: session.publisher.uid,
            pid: session.publisher.pid,
            unitField: session.unitField,
            payload: payload,
            lineStart: &lineStart
        )
    }

    /// Whether a publish of `topic` goes to other hosts: one of the followed patterns, and readable by nobody here.
    private func exportIsSelected(_ topic: Topic) -> Bool {
        switch fleet.exports.exportDecision(for: topic, policy: configuration.accessPolicy, reader: FleetLink.nobody) {
        case .export: return true
        case .notSelected: return false
        case .notReadable:
            fleet.notExported += 1
            return false
        }
    }

    /// The follower is gone: nothing more is exported until the fleet service follows again.
    func fleetSessionClosed(_ session: Session) {
        guard fleet.follower === session else { return }
        fleet.follower = nil
        // Its counters went with it: `STATS` must not show a fleet that is gone as connected.
        fleet.reported = []
        fleet.refusedByFleet = 0
    }

    /// The fleet's counters for `STATS`: whether the fleet service follows now, what this daemon took in and
    /// refused, then the fleet service's own as it last reported them (docs/federation.md, "Watching it").
    var fleetCounters: [ServerStats.Counter] {
        guard configuration.fleetUID != nil || fleet.importer != nil else { return [] }
        return [
            .init(name: "fleet_linked", value: fleet.follower == nil ? 0 : 1),
            .init(name: "nats_imported", value: fleet.imported),
            .init(name: "nats_clears_imported", value: fleet.clearsImported),
            .init(name: "nats_import_refused", value: fleet.importRefused.saturatingAdd(fleet.refusedByFleet)),
            .init(name: "nats_import_repeats", value: fleet.filter.repeats),
            .init(name: "nats_not_exported", value: fleet.notExported),
        ]
    }
}
