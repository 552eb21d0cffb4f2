import NATSClient
import NIOCore
import NotifyBus
import NotifyBroker
import NotifyFederation
import Testing

/// The import path after a restart (no socket): what the state log holds of other hosts' messages counts as taken
/// in, so a stream's redelivery of a message taken in but not acknowledged before the daemon stopped is a repeat.
@Suite("Imports after a restart", .timeLimit(.minutes(3)))
struct ImportPathTests {
    static let nobody = PeerCredentials(pid: 1, uid: ImportedMessage.importerUID, gid: ImportedMessage.importerUID)

    /// A message as NATS delivers it: its headers read from the wire, as the bridge reads them.
    static func message(_ topic: String, host: String, sequence: UInt64, time: UInt64) throws -> NATSMessage {
        let headers = "NATS/1.0\r\nNotifyd-Host: \(host)\r\nNotifyd-Seq: \(sequence)\r\nNotifyd-Time: \(time)\r\nNotifyd-Retain: 1\r\n\r\n"
        let payload = "m\(sequence)"
        let size = headers.utf8.count
        var wire = ByteBuffer(string: "HMSG notifyd.\(topic) 1 \(size) \(size + payload.utf8.count)\r\n\(headers)\(payload)\r\n")
        guard case .message(let message)? = try NATSServerDecoder().decode(buffer: &wire) else { throw NATSError("no message decoded") }
        return message
    }

    @Test("a message the broker holds from before (its origin and number) is a repeat; the next one is taken in")
    func redeliveryAfterRestart() throws {
        let broker = Broker()
        let importer = broker.openImporter(peer: Self.nobody)
        let topic = try Topic("fed.status")
        let now = PublishTime.now().microsecondsSinceEpoch
        for sequence in 1...5 as ClosedRange<UInt64> {
            var path = ImportPath(hostName: "beta")
            let outcome = path.take(try Self.message("fed.status", host: "alpha", sequence: sequence, time: now - 10_000_000), topic: topic, replayed: false, into: broker, through: importer, now: now)
            #expect(outcome == .published)
        }
        // A fresh path: the bridge of a daemon that has just started, its filter empty.
        var restarted = ImportPath(hostName: "beta")
        let again = try Self.message("fed.status", host: "alpha", sequence: 5, time: now - 10_000_000)
        #expect(restarted.take(again, topic: topic, replayed: false, into: broker, through: importer, now: now) == .repeated)
        #expect(restarted.filter.repeats == 1)
        let next = try Self.message("fed.status", host: "alpha", sequence: 6, time: now - 5_000_000)
        #expect(restarted.take(next, topic: topic, replayed: false, into: broker, through: importer, now: now) == .published)
        // Another host's message of the same topic is its own matter.
        var other = ImportPath(hostName: "beta")
        let fromGamma = try Self.message("fed.status", host: "gamma", sequence: 2, time: now - 1_000_000)
        #expect(other.take(fromGamma, topic: topic, replayed: false, into: broker, through: importer, now: now) == .published)
    }
}
