/// What the bridge counts, for `STATS` (PROTOCOL.md lists the names): event tallies only, each changed where its
/// event happens; the gauges (outbox, held imports, connection) are read from their owners when the counters are sent.
struct BridgeCounts {
    /// Connections made to a server, and logins a server refused.
    var connects: UInt64 = 0
    var authFailed: UInt64 = 0
    /// Other hosts' messages handed to the daemon (which counts what it took in: `nats_imported`).
    var forwarded: UInt64 = 0
    /// Messages taken in from the log before it reached its end: what was missed while away.
    var caughtUp: UInt64 = 0
    /// Messages the log no longer kept when this host looked for them: announced to its subscribers as dropped.
    var catchUpMissed: UInt64 = 0
    /// Reads of one origin's log started for a gap, and the messages they brought.
    var repairs: UInt64 = 0
    var repaired: UInt64 = 0
    /// Live messages dropped as taken in already.
    var repeats: UInt64 = 0
    /// Records read from the log, and those that did not parse.
    var recordsRead: UInt64 = 0
    var recordsMalformed: UInt64 = 0
    /// Records the server did not store, and times unacknowledged ones were sent again.
    var logRefusals: UInt64 = 0
    var resentRecords: UInt64 = 0
    /// Messages not handed to the daemon: their origin is not a host name a request can carry, or they are over the
    /// daemon's limits.
    var importMalformed: UInt64 = 0
    /// Exports that waited for room in the outbox (`nats_export_waited`).
    var exportsWaitedForRoom: UInt64 = 0
    /// Messages not exported because they were over the server's `max_payload`.
    var tooLarge: UInt64 = 0
}
