import NATSClient
import NIOCore
import NotifyProtocol

/// The fleet's log (`<prefix>_log`, subjects `<prefix>_log.<host>`): each host appends what it exported, an outbox
/// chunk per record, with JetStream acknowledgements; a host reads another's part of it only to repair what it
/// missed live, or to catch up after an absence (docs/federation.md, "Two paths"). The server keeps no state per
/// host: where each host stands is in that host's own state file (``PositionFile``).
struct JetStreamLog: Sendable {
    let prefix: String
    /// How long the stream keeps a record, in seconds.
    let maxAge: Int64
    /// The most bytes it keeps; the oldest go first.
    let maxBytes: Int
    var replicas = 1

    init(settings: BridgeSettings) {
        prefix = settings.prefix
        maxAge = settings.catchUpSeconds
        maxBytes = settings.catchUpBytes
        replicas = settings.streamReplicas
    }

    var streamName: String { Self.streamName(prefix: prefix, suffix: "_log") }
    /// JetStream's error when another stream has the subjects asked for.
    static let subjectsTaken = 10065
    /// The subject `host` appends its records to.
    func subject(of host: String) -> String { prefix + "_log." + host }
    /// The subjects of every host's records.
    var allSubjects: String { prefix + "_log.>" }
    /// The host whose records `subject` holds, if it is one of the log's.
    func host(of subject: String) -> String? {
        let root = prefix + "_log."
        guard subject.utf8.starts(with: root.utf8) else { return nil }
        return String(subject.utf8.dropFirst(root.utf8.count))
    }

    /// The stream of each host's head (`<prefix>_heads`, subjects `<prefix>_head.<host>`, one message each, kept
    /// without an age): the last export number its log acknowledged, so a host back after longer than the log
    /// keeps learns how many it missed, even of an origin quiet since.
    var headsStreamName: String { Self.streamName(prefix: prefix, suffix: "_heads") }
    func headSubject(of host: String) -> String { prefix + "_head." + host }

    /// The stream of exports an earlier version kept (`<prefix>_events`): no longer read or written.
    var earlierStreamName: String { Self.streamName(prefix: prefix, suffix: "_events") }

    static func streamName(prefix: String, suffix: String) -> String {
        String(prefix.map { $0 == "." ? "_" : $0 }) + suffix
    }

    /// Makes the stream, or finds it made by another host (with another configuration: used as it is).
    func ensureStream(over connection: NATSConnection) async throws {
        let nanoseconds = maxAge * 1_000_000_000
        let duplicateWindow = min(nanoseconds, 120 * 1_000_000_000)
        let body = """
            {"name":\(JSONScan.quoted(streamName)),"subjects":[\(JSONScan.quoted(allSubjects))],"retention":"limits",\
            "max_age":\(nanoseconds),"max_bytes":\(maxBytes),"discard":"old","storage":"file","num_replicas":\(replicas),\
            "duplicate_window":\(duplicateWindow)}
            """
        do {
            _ = try await JetStreamAPI(connection).request("STREAM.CREATE." + streamName, body: body, timeout: .seconds(2))
        } catch let error as JetStreamError where error.code == 10058 {
            return
        }
    }

    /// Makes the stream of heads, or finds it.
    func ensureHeadsStream(over connection: NATSConnection) async throws {
        let body = """
            {"name":\(JSONScan.quoted(headsStreamName)),"subjects":[\(JSONScan.quoted(prefix + "_head.>"))],"retention":"limits",\
            "max_msgs_per_subject":1,"discard":"old","storage":"file","num_replicas":\(replicas)}
            """
        do {
            _ = try await JetStreamAPI(connection).request("STREAM.CREATE." + headsStreamName, body: body, timeout: .seconds(2))
        } catch let error as JetStreamError where error.code == 10058 {
            return
        }
    }

    /// The hosts that have a head: every host that ever exported with a log, this one's included.
    func hostsWithHeads(over connection: NATSConnection) async throws -> [String] {
        let info = try await JetStreamAPI(connection).request("STREAM.INFO." + headsStreamName, body: #"{"subjects_filter":">"}"#)
        guard let open = info.firstRange(of: #""subjects":{"#) else { return [] }
        let root = prefix + "_head."
        var hosts: [String] = []
        // "subjects":{"<prefix>_head.a":1,"<prefix>_head.b":1}: the keys, which are subjects (no quotes or escapes in them).
        let body = info[open.upperBound...].prefix { $0 != "}" }
        for entry in body.split(separator: ",") {
            let key = entry.split(separator: ":", maxSplits: 1).first.map { $0.filter { $0 != "\"" } } ?? ""
            if key.hasPrefix(root) { hosts.append(String(key.dropFirst(root.count))) }
        }
        return hosts
    }

    /// `host`'s head, as its stream holds it; nil when it has none (or one that does not read).
    func head(of host: String, over connection: NATSConnection) async throws -> ExportStamp? {
        let body = #"{"last_by_subj":\#(JSONScan.quoted(headSubject(of: host)))}"#
        let reply: String
        do {
            reply = try await JetStreamAPI(connection).request("STREAM.MSG.GET." + headsStreamName, body: body, timeout: .seconds(5))
        } catch let error as JetStreamError where error.code == 10037 {
            return nil
        }
        guard let data = JSONScan.string("data", in: reply), data.utf8.count <= 64, let bytes = Base64.decode(data.utf8) else { return nil }
        return ExportStamp(String(decoding: bytes, as: UTF8.self))
    }

    /// The stream's first and last sequence now.
    func bounds(over connection: NATSConnection) async throws -> (first: UInt64, last: UInt64) {
        let info = try await JetStreamAPI(connection).request("STREAM.INFO." + streamName, body: "")
        return (UInt64(max(0, JSONScan.integer("first_seq", in: info) ?? 0)), UInt64(max(0, JSONScan.integer("last_seq", in: info) ?? 0)))
    }

    /// Whether the earlier version's stream of exports is still on the server.
    func earlierStreamExists(over connection: NATSConnection) async -> Bool {
        (try? await JetStreamAPI(connection).request("STREAM.INFO." + earlierStreamName, body: "")) != nil
    }

    /// A record read back: its stream sequence, its subject, and the chunk it holds.
    struct Record {
        var sequence: UInt64
        var subject: String
        var payload: ByteBuffer
    }

    /// The first record at or after `sequence` under `subject` (nil: none, the log's end), as the stream's leader
    /// has it: a replica just restarted may lag, and a record it lacks must not pass for the end.
    func record(from sequence: UInt64, subject: String, over connection: NATSConnection) async throws -> Record? {
        let body = #"{"seq":\#(max(1, sequence)),"next_by_subj":\#(JSONScan.quoted(subject))}"#
        let reply: String
        do {
            reply = try await JetStreamAPI(connection).request("STREAM.MSG.GET." + streamName, body: body, timeout: .seconds(5))
        } catch let error as JetStreamError where error.code == 10037 {
            return nil
        }
        guard let found = JSONScan.integer("seq", in: reply), found > 0, let subject = JSONScan.string("subject", in: reply) else {
            throw JetStreamError(code: 0, description: "a record came without its sequence or subject")
        }
        let data = JSONScan.string("data", in: reply) ?? ""
        guard let bytes = Base64.decode(data.utf8) else { throw JetStreamError(code: 0, description: "a record's data is not base 64") }
        return Record(sequence: UInt64(found), subject: subject, payload: ByteBuffer(bytes: bytes))
    }
}
