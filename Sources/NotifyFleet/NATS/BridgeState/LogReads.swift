import NIOCore

/// The reads of the log under way on the current connection, and how far catch-up is: at most one read per key,
/// the catch-up's (key "", every origin) and one repair per origin (key: its name), so that two answers never race
/// for the same records. Let go of whole when the connection is.
///
/// Whether the log can be used at all on this connection is kept here too: without it, other hosts' messages are
/// read live, and nothing is read from the log. A value the bridge owns on its event loop; the bridge asks the
/// server, this keeps the books.
struct LogReads {
    /// Catch-up is on but the server has no JetStream, or the log cannot be made or read: what is missed is missed.
    var catchUpUnavailable = false
    /// key → the read under way: "" for catch-up, an origin's name for its repair.
    private var underWay: [String: LogRead] = [:]
    /// Succeeds when this connection's catch-up reaches the log's end and the reads it started end.
    private(set) var catchUpDone: EventLoopPromise<Void>?
    /// The log's last sequence when catch-up started, and how many records were left to read then (`nats_catch_up_lag`).
    private(set) var catchUpTarget: UInt64 = 0
    private(set) var catchUpLag: UInt64 = 0
    /// How many messages the bridge had handed to the daemon when catch-up started: what it brought is the rest.
    private(set) var forwardedBeforeCatchUp: UInt64 = 0

    /// Whether no read is under way.
    var isEmpty: Bool { underWay.isEmpty }

    /// Whether `read` is still the one under way under its key (an answer to one let go of is dropped).
    func isCurrent(_ read: LogRead) -> Bool { underWay[read.key] === read }

    /// Starts catch-up from after log sequence `start` to `target`, `forwarded` messages handed to the daemon so
    /// far; `done` succeeds when it ends. Returns the read to ask the server for.
    mutating func beginCatchUp(after start: UInt64, through target: UInt64, forwarded: UInt64, done: EventLoopPromise<Void>) -> LogRead {
        catchUpDone = done
        catchUpTarget = target
        forwardedBeforeCatchUp = forwarded
        let read = LogRead(host: nil, next: start + 1)
        underWay[read.key] = read
        return read
    }

    /// Starts a repair of `host`'s part of the log after `sequence`; nil when one is under way (it brings the rest).
    mutating func beginRepair(of host: String, after sequence: UInt64) -> LogRead? {
        guard underWay[host] == nil else { return nil }
        let read = LogRead(host: host, next: sequence + 1)
        underWay[host] = read
        return read
    }

    /// Catch-up has read the log through `sequence`.
    mutating func catchUpRead(through sequence: UInt64) {
        catchUpLag = catchUpTarget > sequence ? catchUpTarget - sequence : 0
    }

    /// `read` is over: it found the log's end, gave up, or brought all it was for.
    mutating func end(_ read: LogRead) {
        underWay[read.key] = nil
        if read.host == nil { catchUpLag = 0 }
    }

    /// Lets go of every read and returns the catch-up's promise, for the caller to fail once this returns (what
    /// waits on it runs at once, and may look at this value, which is being changed until then).
    mutating func stop() -> EventLoopPromise<Void>? {
        underWay.removeAll()
        defer { catchUpDone = nil }
        return catchUpDone
    }
}
