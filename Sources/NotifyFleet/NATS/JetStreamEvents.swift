import NATSClient
import NIOCore
import NotifyProtocol

/// The JetStream stream that keeps every export for a while (`<prefix>_events`, subjects `<prefix>.>`: the live
/// subjects themselves, so an export is written once), and this host's durable pull consumer of it, named after the
/// host: what another host published while this one was away waits there until it comes back (README, "Catch-up").
struct JetStreamEvents: Sendable {
    let prefix: String
    /// How long the stream keeps a message, in seconds.
    let maxAge: Int64
    /// The most bytes it keeps; the oldest go first.
    let maxBytes: Int
    var replicas = 1
    /// This host's name, which its consumer is named after.
    let hostName: String
    /// The subject its consumer reads: the whole stream, so that a jump in the stream's sequence numbers is a loss
    /// (the bridge keeps what it imports).
    var filterSubject: String { prefix + ".>" }

    init(settings: BridgeSettings) {
        prefix = settings.prefix
        maxAge = settings.catchUpSeconds
        maxBytes = settings.catchUpBytes
        replicas = settings.streamReplicas
        hostName = settings.hostName
    }

    var streamName: String { String(prefix.map { $0 == "." ? "_" : $0 }) + "_events" }
    /// A durable name has no `.`, `*`, `>` or space: a host name's `.` is written `_2E`, and its `_` `_5F`, so that no
    /// two host names (`a.b`, `a_b`) share a consumer.
    var consumerName: String {
        var name = ""
        for character in hostName {
            switch character {
            case ".": name += "_2E"
            case "_": name += "_5F"
            default: name.append(character)
            }
        }
        return name
    }

    /// Where this host's consumer stands when the connection starts.
    struct Position: Equatable {
        /// Whether the consumer was made now (this host never read the stream before, or its consumer was removed).
        var isNew: Bool
        /// Messages the stream no longer keeps that the consumer had not reached: aged out, or pushed out by the
        /// byte bound, while this host was away.
        var missed: UInt64
        /// Messages waiting for it.
        var pending: UInt64
        /// The stream sequence number the consumer reads on after: the next one it gets should be the one after.
        var readThrough: UInt64
    }

    /// Makes the stream, or finds it made by another host (with another configuration: used as it is).
    func ensureStream(over connection: NATSConnection) async throws {
        let nanoseconds = maxAge * 1_000_000_000
        // The window in which JetStream drops a repeated Nats-Msg-Id must not be longer than the stream keeps.
        let duplicateWindow = min(nanoseconds, 120 * 1_000_000_000)
        let body = """
            {"name":\(JSONScan.quoted(streamName)),"subjects":[\(JSONScan.quoted(prefix + ".>"))],"retention":"limits",\
            "max_age":\(nanoseconds),"max_bytes":\(maxBytes),"discard":"old","storage":"file","num_replicas":\(replicas),\
            "duplicate_window":\(duplicateWindow)}
            """
        do {
            _ = try await JetStreamAPI(connection).request("STREAM.CREATE." + streamName, body: body, timeout: .seconds(2))
        } catch let error as JetStreamError where error.code == 10058 {
            return
        }
    }

    /// Makes this host's durable consumer, or finds it, and says where it stands. A consumer of another filter (made
    /// by an earlier version) is made again, and so is one with messages delivered and not acknowledged: the daemon
    /// never confirmed them (its link, or the daemon, was lost), and JetStream would deliver them again only after
    /// `ack_wait`, behind newer ones of their topics, which the daemon would then take for repeats. Made again at its
    /// acknowledged floor, it delivers them first, in order.
    func ensureConsumer(over connection: NATSConnection) async throws -> Position {
        let api = JetStreamAPI(connection)
        var isNew = false
        var info: String
        do {
            info = try await api.request("CONSUMER.INFO.\(streamName).\(consumerName)", body: "")
            let unconfirmed = (JSONScan.integer("num_ack_pending", in: info) ?? 0) > 0
            if JSONScan.string("filter_subject", in: info) != filterSubject || unconfirmed {
                // Made again where the old one stood: nothing it had not read is skipped.
                let floor = UInt64(max(0, Self.ackFloor(in: info) ?? 0))
                _ = try await api.request("CONSUMER.DELETE.\(streamName).\(consumerName)", body: "")
                _ = try await create(api, after: floor)
                info = try await api.request("CONSUMER.INFO.\(streamName).\(consumerName)", body: "")
            }
        } catch let error as JetStreamError where error.code == 10014 {
            // No such consumer: this host's first time, or its consumer was removed.
            info = try await create(api)
            isNew = true
        }
        let streamInfo = try await api.request("STREAM.INFO." + streamName, body: "")
        let firstKept = UInt64(max(0, JSONScan.integer("first_seq", in: streamInfo) ?? 0))
        let acknowledged = UInt64(max(0, Self.ackFloor(in: info) ?? 0))
        let pending = UInt64(max(0, JSONScan.integer("num_pending", in: info) ?? 0))
        // The consumer reads on from past its acknowledged floor; what is gone between the two was never read.
        let missed = !isNew && firstKept > acknowledged + 1 ? firstKept - acknowledged - 1 : 0
        let lastKept = UInt64(max(0, JSONScan.integer("last_seq", in: streamInfo) ?? 0))
        // A new consumer starts with what comes next; an old one after its floor, or after what is gone.
        let readThrough = isNew ? lastKept : max(acknowledged, firstKept > 0 ? firstKept - 1 : 0)
        return Position(isNew: isNew, missed: missed, pending: pending, readThrough: readThrough)
    }

    /// Makes the consumer: from the next message, or from the one after stream sequence `after`.
    private func create(_ api: JetStreamAPI, after: UInt64? = nil) async throws -> String {
        let start = after.map { #""deliver_policy":"by_start_sequence","opt_start_seq":\#($0 + 1)"# } ?? #""deliver_policy":"new""#
        let body = """
            {"stream_name":\(JSONScan.quoted(streamName)),"config":{"durable_name":\(JSONScan.quoted(consumerName)),\
            \(start),"ack_policy":"all","ack_wait":30000000000,"max_ack_pending":\(Self.batch * 4),\
            "max_deliver":-1,"filter_subject":\(JSONScan.quoted(filterSubject)),"replay_policy":"instant",\
            "max_waiting":16}}
            """
        return try await api.request("CONSUMER.DURABLE.CREATE.\(streamName).\(consumerName)", body: body)
    }

    /// Messages asked for by one pull request.
    static let batch = 1_000
    /// How long a pull request waits on the server for messages before it ends (and another is sent).
    static let pullExpiry = TimeAmount.seconds(5)

    /// The subject a pull request goes to.
    var nextSubject: String { "$JS.API.CONSUMER.MSG.NEXT.\(streamName).\(consumerName)" }

    /// The body of a pull request: a batch, waiting at most ``pullExpiry`` for it.
    static var pullBody: ByteBuffer {
        ByteBuffer(string: #"{"batch":\#(batch),"expires":\#(pullExpiry.nanoseconds)}"#)
    }

    /// How many stream numbers lie between `readThrough` (the last read; 0 before any) and `sequence` (the next read):
    /// messages gone before they were read. The numbers come from the server's reply subjects, where any client of
    /// the server could put any number: no arithmetic here can overflow.
    static func skipped(after readThrough: UInt64, to sequence: UInt64) -> UInt64 {
        guard readThrough > 0, sequence > readThrough else { return 0 }
        return sequence - readThrough - 1
    }

    /// The stream sequence of the consumer's acknowledged floor, from its info.
    static func ackFloor(in info: String) -> Int? {
        guard let range = info.firstRange(of: #""ack_floor":"#) else { return nil }
        return JSONScan.integer("stream_seq", in: String(info[range.upperBound...]))
    }
}
