import NotifyProtocol

/// The times messages are stamped with: the clock read once per batch, and never a time earlier than one given out
/// before, here or (restored from the state log) before a restart, so that a clock set back cannot make a resume by
/// time skip what came after.
///
/// Publishes read together are told apart by their sequence numbers, not their times, and a read of the clock per
/// message was a tenth of a small publish's cost. A batch is one turn of one connection's reads in the daemon (a
/// thousand small requests at most), or a read of messages from NATS with what else the event loop handles before
/// that read is flushed, so the stamp is about when its first message was read.
struct PublishClock {
    /// The clock itself; tests pass their own.
    let read: () -> PublishTime
    /// The latest time a message was stamped with.
    private(set) var latest = PublishTime(microsecondsSinceEpoch: 0)
    /// The time this batch's publishes are stamped with, read at its first and forgotten at its end.
    private var batchTime: PublishTime?

    init(_ read: @escaping () -> PublishTime) { self.read = read }

    /// The time now, as the clock says (for what is not a message's stamp: counters, pauses, statistics).
    func now() -> PublishTime { read() }

    /// The time this batch's publishes (and clears) are stamped with.
    @inline(__always)
    mutating func stamp() -> PublishTime {
        if let stamped = batchTime { return stamped }
        let time = max(read(), latest)
        latest = time
        batchTime = time
        return time
    }

    /// Ends the batch: the next stamp reads the clock again.
    @inline(__always)
    mutating func endBatch() { batchTime = nil }

    /// Makes the next stamp later than every time given out: a topic forgotten is numbered again from 1, and a client
    /// tells its new messages from repeats of the old by their times (a message no newer than the last of its topic
    /// by both number and time is one it had), so they must not share the old messages' time, as messages of one
    /// batch otherwise do.
    mutating func moveOnAfterForgetting() {
        latest = PublishTime(microsecondsSinceEpoch: latest.microsecondsSinceEpoch.saturatingAdd(1))
        batchTime = nil
    }

    /// Notes a time a message was stamped with before a restart: no stamp from now on is earlier.
    mutating func restored(_ time: PublishTime) { latest = max(latest, time) }
}
