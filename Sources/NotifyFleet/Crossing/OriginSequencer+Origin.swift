import DequeModule

/// What the sequencer keeps of each origin: where this host stands in its exports, the live messages that wait for its
/// log, and the read of the log under way (``OriginSequencer``).
extension OriginSequencer {
    struct Held {
        var message: Message
        var stamp: ExportStamp
        var logSequence: UInt64
        var size: Int
        /// Read from the log: real, waiting only for the records before it (an origin's records may be stored out
        /// of order when its server changes: one refused, a later one taken, the first sent again).
        var confirmed = false
    }

    struct Origin {
        var position: Position?
        var held = Deque<Held>()
        var heldBytes = 0
        /// The newest live message let go of because too many waited: the log must bring everything through it.
        var discardedThrough: ExportStamp?
        /// The origin's head (``expect(_:through:)``): its log held everything through it once.
        var expectedThrough: ExportStamp?
        /// Of an origin not followed yet, the earliest live message that waited: where following it starts, even
        /// once what waited was let go of (a burst past the bound: the log must bring all of it, not just the newest).
        var firstSeen: ExportStamp?
        /// Where a read of its log starts: the least `Notifyd` log sequence of the live messages that waited (each
        /// says the log held nothing of it through there). The least, not the first message's: a forged one can
        /// only make the read start sooner, never skip the real origin's records.
        var firstSeenAfter: UInt64 = .max
        var isRepairing = false

        typealias Limit = (messages: Int, bytes: Int, all: Int)

        /// Holds a live message until the log is read; past `limit`, lets go of all that waits (they are all in
        /// the log, or lost with their origin), and the read must reach the newest.
        mutating func hold(_ message: Held, limit: Limit, totals: inout Totals) {
            if position == nil {
                if firstSeen.map({ OriginSequencer.precedes(message.stamp, $0) }) ?? true { firstSeen = message.stamp }
                firstSeenAfter = min(firstSeenAfter, message.logSequence)
            }
            guard held.count >= limit.messages || heldBytes + message.size > limit.bytes
                || totals.heldBytes + message.size > limit.all || discardedThrough != nil
            else {
                insert(message, totals: &totals)
                return
            }
            totals.discarded += UInt64(held.count + 1)
            totals.heldMessages -= held.count
            totals.heldBytes -= heldBytes
            let newest = held.last.map { OriginSequencer.later($0.stamp, message.stamp) } ?? message.stamp
            discardedThrough = discardedThrough.map { OriginSequencer.later($0, newest) } ?? newest
            held.removeAll()
            heldBytes = 0
        }

        /// Holds a record's entry that comes after a gap; false when `limit` leaves no room.
        mutating func holdConfirmed(_ message: Held, limit: Limit, totals: inout Totals) -> Bool {
            guard held.count < limit.messages, heldBytes + message.size <= limit.bytes, totals.heldBytes + message.size <= limit.all
            else { return false }
            insert(message, totals: &totals)
            return true
        }

        /// Puts `message` where its number goes (the usual case: last); one already there with its number is kept,
        /// made confirmed if this one is.
        mutating func insert(_ message: Held, totals: inout Totals) {
            var index = held.endIndex
            while index > held.startIndex, OriginSequencer.precedes(message.stamp, held[index - 1].stamp) { index -= 1 }
            if index > held.startIndex, held[index - 1].stamp == message.stamp {
                if message.confirmed { held[index - 1] = message }
                return
            }
            held.insert(message, at: index)
            heldBytes += message.size
            totals.heldMessages += 1
            totals.heldBytes += message.size
        }

        /// Takes the waiting live messages that are now next, drops those the log brought, and ends the read once
        /// none waits and the log has brought everything let go of.
        mutating func release(into take: inout [Message], isCatchingUp: Bool, totals: inout Totals) {
            while var position {
                // What the log brought, wherever it waits.
                let before = held.count
                var bytesBrought = 0
                held.removeAll { message in
                    guard message.stamp.epoch < position.epoch || (message.stamp.epoch == position.epoch && message.stamp.number <= position.taken)
                    else { return false }
                    bytesBrought += message.size
                    return true
                }
                heldBytes -= bytesBrought
                totals.heldBytes -= bytesBrought
                totals.heldMessages -= before - held.count
                guard let first = held.first, first.stamp.epoch == position.epoch, first.stamp.number == position.taken + 1 else { break }
                position.taken = first.stamp.number
                position.logSequence = max(position.logSequence, first.logSequence)
                self.position = position
                take.append(first.message)
                held.removeFirst()
                heldBytes -= first.size
                totals.heldMessages -= 1
                totals.heldBytes -= first.size
            }
            if let through = discardedThrough, let position, (position.epoch, position.taken) >= (through.epoch, through.number) {
                discardedThrough = nil
            }
            if let through = expectedThrough, let position, (position.epoch, position.taken) >= (through.epoch, through.number) {
                expectedThrough = nil
            }
            if isRepairing, !isCatchingUp, held.isEmpty, discardedThrough == nil, expectedThrough == nil {
                isRepairing = false
                totals.repairs -= 1
            }
        }
    }
}
