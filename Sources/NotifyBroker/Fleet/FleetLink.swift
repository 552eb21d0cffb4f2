import NotifyProtocol

/// The fleet service's way into this daemon (protocol 5; docs/federation.md): the connection that follows this host's
/// publishes to send them to other hosts, the session other hosts' messages are published through, what was taken in
/// (to tell repeats), and the counters of both sides. Only the configured fleet user
/// (``BrokerConfiguration/fleetUID``) reaches it.
final class FleetLink {
    /// The connection that sent `FOLLOW` last: it gets an `EXP` frame for each export.
    var follower: Session?
    /// The topics that go out, as its `FOLLOW` named them.
    var exports = FleetTopics([])
    /// The session other hosts' messages are published through, as user nobody (``openImporter(peer:)``); made at
    /// the first import.
    var importer: Session?
    /// What was taken in, per topic: repeats are skipped, a forged future time refused.
    var filter = ImportFilter()
    /// Other hosts' messages published here.
    var imported: UInt64 = 0
    /// Other hosts' clears taken in (applied, or outdated by a newer message here).
    var clearsImported: UInt64 = 0
    /// Imports refused by a check or a rule (each answered `ERR`).
    var importRefused: UInt64 = 0
    /// Messages the fleet service refused before sending them (over this daemon's limits, a host that is no host
    /// name), as it last reported.
    var refusedByFleet: UInt64 = 0
    /// This host's publishes of exported topics that nobody may read here: never sent.
    var notExported: UInt64 = 0
    /// The fleet service's own counters, as it last reported them (`FLEETSTATS`).
    var reported: [ServerStats.Counter] = []
    /// The last import's host and unit, and the unit field made of them: consecutive imports usually share it.
    /// (Read and set per imported message: unchecked, as the broker's own per-message state is.)
    @exclusivity(unchecked) var lastImportUnit: (host: String, unit: String?, field: String)?
    /// Why the importer's last publish was refused, for ``Broker/publishImported(_:through:)`` to say.
    @exclusivity(unchecked) var lastImportRefusal: ProtocolError?
    /// Messages of other hosts lost before this daemon could take them in (the fleet's log no longer kept them),
    /// and when the last such loss was found: told to subscribers that resume from before it.
    var missedImports: UInt64?
    var missedImportsNewest = PublishTime(microsecondsSinceEpoch: 0)

    /// Whom exports are read as, and other hosts' messages published as: user nobody (see
    /// ``ImportedMessage/importerUID``). A topic goes out only if nobody may read it here, since every client of
    /// the NATS server reads what is exported.
    static let nobody = PeerCredentials(pid: 0, uid: ImportedMessage.importerUID, gid: ImportedMessage.importerUID)
}
