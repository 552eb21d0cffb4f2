import DequeModule

/// Which of other hosts' messages a receiver takes in, and when: each origin's exports come numbered
/// (``ExportStamp``), live on core NATS and, batched, in the origin's log. A live message that is the next of its
/// origin is taken at once; anything else (a gap, an origin that started again, an origin not seen before) waits while
/// the origin's log is read from where this host stands, and the log decides: what it holds is taken in the origin's
/// order, what it no longer holds is a loss to announce, and the live messages that waited are taken after, or dropped
/// as repeats. No I/O: the bridge reads the log and hands the records here; the tests hand forged ones.
///
/// Where this host stands in each origin's exports (``Position``) moves only on a live message that is the next one,
/// or on the log: a live message claiming a number far ahead, or an epoch the log never shows, waits for the log,
/// then is taken without moving it (``giveUp(_:)``), so a forger can neither silence an origin nor make it skip.
/// Bounded: the origins followed, the messages waiting per origin and in all, and the jump one record may make.
package struct OriginSequencer<Message> {
    package typealias Position = OriginPosition

    /// What becomes of a live message.
    package enum LiveOutcome: Equatable {
        /// Take it in now.
        case take
        /// Taken in already (from the log, or a resend), or of an earlier run of its origin: drop it.
        case repeated
        /// It waits for the log. `readFrom`: start reading the origin's log after this stream sequence (nil: a read
        /// is under way, or catch-up reads every origin's log).
        case held(readFrom: UInt64?)
        /// Too many origins followed, or reads under way: take it in without moving any position.
        case untracked
    }

    private var origins: [String: Origin] = [:]
    /// Whether every origin's log is being read (a start, a reconnect): live messages wait, and no origin's own read
    /// starts until ``endCatchUp()``.
    package private(set) var isCatchingUp = false
    /// What all origins hold and do, counted: a struct of its own so that an origin's entry can be changed in place
    /// beside it (a copy of the entry out of the dictionary and back copied its whole waiting queue each time:
    /// quadratic in what waits, seconds of CPU for a first burst of 10,000).
    struct Totals {
        var heldMessages = 0
        var heldBytes = 0
        var repairs = 0
        var discarded: UInt64 = 0
        var unconfirmed: UInt64 = 0
    }

    private var totals = Totals()
    /// Messages waiting, in all, and their bytes.
    package var heldMessages: Int { totals.heldMessages }
    package var heldBytes: Int { totals.heldBytes }
    /// Origins whose log is being read now.
    package var repairs: Int { totals.repairs }
    /// Live messages let go of while waiting (the log brings them, or they were lost), and those taken without the
    /// log confirming them (``giveUp(_:)``).
    package var discarded: UInt64 { totals.discarded }
    package var unconfirmed: UInt64 { totals.unconfirmed }
    /// Entries of records skipped for a jump past ``largestJump``.
    package private(set) var implausible: UInt64 = 0

    /// The most origins followed: a fleet of hundreds, with room; a forger inventing host names stops here.
    package var originLimit = 4_096
    /// The most messages, and bytes, waiting for one origin's log, and in all.
    package var heldLimitPerOrigin = 10_000
    package var heldBytesPerOrigin = 8 << 20
    package var heldBytesLimit = 64 << 20
    /// The most origins whose log is read at once.
    package var repairLimit = 64
    /// The most numbers one record entry may skip: more is no loss a real origin makes, but a forgery.
    package static var largestJump: UInt64 { 1 << 32 }

    package init(positions: [String: Position] = [:]) {
        restore(positions)
    }

    /// Where this host stands in every origin's exports, for the state file.
    package var positions: [String: Position] {
        origins.compactMapValues(\.position)
    }

    package func position(of host: String) -> Position? { origins[host]?.position }

    /// Starts again from `positions` (the last the daemon confirmed): what waited is let go of; the log brings it.
    package mutating func restore(_ positions: [String: Position]) {
        origins = positions.mapValues { Origin(position: $0) }
        totals.heldMessages = 0
        totals.heldBytes = 0
        totals.repairs = 0
        isCatchingUp = false
    }

    /// Where a read of every origin's log starts: after the earliest position (nil: none known).
    package var catchUpStart: UInt64? {
        origins.values.compactMap { $0.position?.logSequence }.min()
    }

    /// Whether `host`'s log is being read for it.
    package func isRepairing(_ host: String) -> Bool { origins[host]?.isRepairing ?? false }

    // MARK: Live

    /// What to do with a live message of `host`'s, numbered `stamp`, exported after log record `logSequence`.
    package mutating func live(_ message: Message, host: String, stamp: ExportStamp, logSequence: UInt64, size: Int) -> LiveOutcome {
        // The host is looked up once: the next message of a known origin (nearly every one) is taken with one hash.
        var found = origins.index(forKey: host)
        if found == nil {
            guard origins.count < originLimit else { return .untracked }
            origins[host] = Origin()
            found = origins.index(forKey: host)
        }
        let index = found!
        if let position = origins.values[index].position {
            if stamp.epoch < position.epoch || (stamp.epoch == position.epoch && stamp.number <= position.taken) { return .repeated }
            // The next one is taken even while a read is under way: what waits is all later (a gap, or a forgery
            // far ahead, which must not hold the real origin back).
            if stamp.epoch == position.epoch, stamp.number == position.taken + 1, !isCatchingUp {
                origins.values[index].position!.taken = stamp.number
                if logSequence > position.logSequence { origins.values[index].position!.logSequence = logSequence }
                return .take
            }
        }
        let reading = origins[host]!.isRepairing || isCatchingUp
        guard reading || repairs < repairLimit else {
            // Too many reads under way: taken as it is, confirmed by nothing (the daemon still drops repeats).
            totals.unconfirmed += 1
            if origins[host]!.position == nil { origins[host] = nil }
            return .untracked
        }
        hold(Held(message: message, stamp: stamp, logSequence: logSequence, size: size), of: host)
        if reading { return .held(readFrom: nil) }
        totals.repairs += 1
        origins[host]!.isRepairing = true
        return .held(readFrom: origins[host]!.position?.logSequence ?? min(logSequence, origins[host]!.firstSeenAfter))
    }

    private mutating func hold(_ held: Held, of host: String) {
        origins[host]!.hold(held, limit: heldLimit, totals: &totals)
    }

    /// The bounds on what waits, as an origin's steps take them.
    private var heldLimit: Origin.Limit { (messages: heldLimitPerOrigin, bytes: heldBytesPerOrigin, all: heldBytesLimit) }

    /// Holds a record's entry that comes after a gap, until the records before it are read; false when the bounds
    /// leave no room (the gap is then taken as a loss).
    private mutating func holdConfirmed(_ held: Held, of host: String) -> Bool {
        origins[host]!.holdConfirmed(held, limit: heldLimit, totals: &totals)
    }

    static func precedes(_ a: ExportStamp, _ b: ExportStamp) -> Bool {
        (a.epoch, a.number) < (b.epoch, b.number)
    }

    static func later(_ a: ExportStamp, _ b: ExportStamp) -> ExportStamp {
        (a.epoch, a.number) >= (b.epoch, b.number) ? a : b
    }

    // MARK: The log

    /// What reading a record gave.
    package struct Applied {
        /// To take in, in order.
        package var take: [Message] = []
        /// Messages the log no longer holds that this host never took in: to announce as dropped.
        package var missed: UInt64 = 0
    }

    /// Takes in what record `recordSequence` of `host`'s log holds that this host lacks, in order, and the live
    /// messages that waited for it once nothing before them is missing. `entries`: the record's messages, with their
    /// stamps (nil: no number, not an export of a fleet service), in the record's order.
    package mutating func apply(
        record recordSequence: UInt64,
        of host: String,
        entries: [(message: Message, stamp: ExportStamp?)]
    ) -> Applied {
        var applied = Applied()
        if origins[host] == nil {
            guard origins.count < originLimit else { return applied }
            origins[host] = Origin()
        }
        for entry in entries {
            guard let stamp = entry.stamp else { continue }
            if origins[host]!.position == nil {
                // An origin met now: it starts with the first live message that waited for it (older messages are
                // from before this host followed it), or with the first it has in the log.
                if let first = origins[host]!.firstSeen, stamp.epoch != first.epoch || stamp.number < first.number {
                    continue
                }
                origins[host]!.position = Position(epoch: stamp.epoch, taken: stamp.number - 1, logSequence: recordSequence - 1)
                origins[host]!.firstSeen = nil
            }
            var position = origins[host]!.position!
            if stamp.epoch < position.epoch { continue }
            if stamp.epoch > position.epoch {
                // The origin started again: its new run's numbers start from 1.
                position = Position(epoch: stamp.epoch, taken: 0, logSequence: position.logSequence)
            }
            if stamp.number <= position.taken { continue }
            let gap = stamp.number - position.taken - 1
            guard gap <= Self.largestJump else {
                implausible += 1
                continue
            }
            if gap > 0 {
                // The records before it may come later in the log: it waits for them (or for the read's end).
                let held = Held(message: entry.message, stamp: stamp, logSequence: recordSequence, size: 1, confirmed: true)
                if holdConfirmed(held, of: host) { continue }
                applied.missed += gap
            }
            position.taken = stamp.number
            origins[host]!.position = position
            applied.take.append(entry.message)
            release(host, into: &applied.take)
        }
        if let position = origins[host]!.position { origins[host]!.position!.logSequence = max(position.logSequence, recordSequence) }
        release(host, into: &applied.take)
        return applied
    }

    /// Takes the waiting live messages that are now next, drops those the log brought, and ends the read once none
    /// waits and the log has brought everything let go of.
    private mutating func release(_ host: String, into take: inout [Message]) {
        origins[host]!.release(into: &take, isCatchingUp: isCatchingUp, totals: &totals)
    }

    /// The log's end was reached, and what waits for `host` is still not next: the log may not have it yet (its
    /// record on its way), or never will. The caller reads again a little later, then gives up.
    package func needsMore(_ host: String) -> Bool { origins[host]?.isRepairing ?? false }

    /// Starts following `host` at `position`, unless it is followed already or too many are. Returns whether it is
    /// followed now.
    package mutating func begin(_ host: String, at position: Position) -> Bool {
        if origins[host]?.position != nil { return true }
        guard origins[host] != nil || origins.count < originLimit else { return false }
        origins[host, default: Origin()].position = position
        origins[host]!.firstSeen = nil
        return true
    }

    /// The first message the log brought for `host` after a gap: the gap is final only once the origin's head is
    /// at least the number before it (the origin's log held the gap once), or the origin started again.
    package func gapEnd(_ host: String) -> ExportStamp? {
        origins[host]?.held.first { $0.confirmed }?.stamp
    }

    /// Whether all that `host`'s read waits for is its head: what the log brings it brings at once (the head is
    /// written only once the log holds everything through it), so its end is the end.
    package func waitsOnlyForHead(_ host: String) -> Bool {
        guard let origin = origins[host] else { return false }
        return origin.expectedThrough != nil && origin.held.isEmpty && origin.discardedThrough == nil
    }

    /// `host`'s head says its log held every export through `head`: when this host stands before it, a read of the
    /// log from where it stands must bring the rest. Returns where to start that read, or nil when none is needed
    /// (or one is under way, which will look for it too).
    package mutating func expect(_ host: String, through head: ExportStamp) -> UInt64? {
        guard let index = origins.index(forKey: host), let position = origins.values[index].position, !isCatchingUp else { return nil }
        guard (head.epoch, head.number) > (position.epoch, position.taken), head.epoch >= position.epoch else { return nil }
        if head.epoch == position.epoch, head.number - position.taken > Self.largestJump {
            implausible += 1
            return nil
        }
        origins.values[index].expectedThrough = origins.values[index].expectedThrough.map { Self.later($0, head) } ?? head
        guard !origins.values[index].isRepairing, totals.repairs < repairLimit else { return nil }
        origins.values[index].isRepairing = true
        totals.repairs += 1
        return position.logSequence
    }

    /// What `host`'s head said the log held and the log no longer holds: counted as missed, and this host stands
    /// at the head from now on (nothing before it can come any more).
    private mutating func settleHead(of origin: inout Origin) -> UInt64 {
        guard let head = origin.expectedThrough, var position = origin.position else { return 0 }
        origin.expectedThrough = nil
        guard (head.epoch, head.number) > (position.epoch, position.taken) else { return 0 }
        let missed = head.epoch == position.epoch ? head.number - position.taken : head.number
        position.epoch = head.epoch
        position.taken = head.number
        origin.position = position
        return missed
    }

    /// The log did not bring what waits within the time allowed: the read ends, and the waiting messages are let
    /// go of, the position unmoved (a forgery never shows in the log; a real message whose record comes later is
    /// read with the origin's next gap, or its head). An origin met only through them is forgotten. `keeping`:
    /// they are returned to be taken in as they are instead (the log cannot be read at all). What the origin's head
    /// said the log held and it no longer holds is `missed`.
    package mutating func giveUp(_ host: String, keeping: Bool = false) -> [Message] {
        giveUpCounting(host, keeping: keeping).released
    }

    package mutating func giveUpCounting(_ host: String, keeping: Bool = false) -> (released: [Message], missed: UInt64) {
        // Taken out and put back: a copy left in the dictionary would share the queue.
        guard var origin = origins.removeValue(forKey: host) else { return ([], 0) }
        var released: [Message] = []
        var missed: UInt64 = 0
        // In number order: what the log brought is taken, the numbers before it it never brought are missed;
        // what only came live is let go of (or, `keeping`, taken as it is).
        for held in origin.held {
            totals.heldMessages -= 1
            totals.heldBytes -= held.size
            if held.confirmed, var position = origin.position {
                if held.stamp.epoch < position.epoch || (held.stamp.epoch == position.epoch && held.stamp.number <= position.taken) { continue }
                if held.stamp.epoch > position.epoch { position = Position(epoch: held.stamp.epoch, taken: 0, logSequence: position.logSequence) }
                missed += held.stamp.number - position.taken - 1
                position.taken = held.stamp.number
                position.logSequence = max(position.logSequence, held.logSequence)
                origin.position = position
                released.append(held.message)
            } else if keeping {
                released.append(held.message)
            } else {
                totals.unconfirmed += 1
            }
        }
        origin.held.removeAll()
        origin.heldBytes = 0
        missed += settleHead(of: &origin)
        origin.discardedThrough = nil
        if origin.isRepairing {
            origin.isRepairing = false
            totals.repairs -= 1
        }
        if origin.position != nil { origins[host] = origin }
        return (released, missed)
    }

    /// Every waiting message, of every origin, taken in as it is: the log cannot be read any more.
    package mutating func takeEverything() -> [Message] {
        var released: [Message] = []
        for host in origins.keys.sorted() { released += giveUp(host, keeping: true) }
        isCatchingUp = false
        return released
    }

    // MARK: Catch-up

    /// Every origin's log is read from ``catchUpStart``: live messages wait until ``endCatchUp()``.
    package mutating func beginCatchUp() {
        isCatchingUp = true
    }

    /// The read of every origin's log reached its end: what waited and is now next is taken; an origin whose live
    /// messages still wait gets a read of its own, from where it stands (`reads`).
    /// `through`: the read saw every record of the log through this sequence, so no origin lacks one before it.
    package mutating func endCatchUp(through: UInt64) -> (take: [Message], reads: [(host: String, from: UInt64)]) {
        isCatchingUp = false
        var take: [Message] = []
        var reads: [(host: String, from: UInt64)] = []
        for host in origins.keys.sorted() {
            if let position = origins[host]!.position { origins[host]!.position!.logSequence = max(position.logSequence, through) }
            release(host, into: &take)
            let origin = origins[host]!
            guard !origin.held.isEmpty || origin.discardedThrough != nil, !origin.isRepairing else { continue }
            guard totals.repairs < repairLimit else {
                take += giveUp(host)
                continue
            }
            totals.repairs += 1
            origins[host]!.isRepairing = true
            reads.append((host, origin.position?.logSequence ?? (origin.firstSeenAfter == .max ? 0 : origin.firstSeenAfter)))
        }
        return (take, reads)
    }
}
