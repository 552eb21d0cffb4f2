import NATSClient
import NIOCore
import NotifyProtocol

/// The JetStream stream that keeps the fleet's latest retained message of each topic: subjects
/// `<prefix>-latest.<topic>`, one message per subject (as NATS's key-value buckets keep a key), in stream
/// `<prefix>_latest` (dots of the prefix made underscores, which stream names need).
struct JetStreamLatest: Sendable {
    let prefix: String
    /// Copies of the stream a cluster keeps (1 to 5): more survive the loss of a server.
    var replicas = 1

    /// The first tokens of the stream's subjects.
    var subjectRoot: String { prefix + "-latest" }
    var streamName: String { String(prefix.map { $0 == "." ? "_" : $0 }) + "_latest" }

    /// Makes the stream, or finds it made by another host (the same configuration: nothing happens; another one,
    /// which an administrator may have chosen, such as more replicas: it is used as it is).
    func ensureStream(over connection: NATSConnection) async throws {
        let body = """
            {"name":\(JSONScan.quoted(streamName)),"subjects":[\(JSONScan.quoted(subjectRoot + ".>"))],"retention":"limits",\
            "max_msgs_per_subject":1,"discard":"old","storage":"file","num_replicas":\(replicas)}
            """
        do {
            // Short: exports wait for it on a first connection, and a healthy JetStream answers in milliseconds.
            _ = try await JetStreamAPI(connection).request("STREAM.CREATE." + streamName, body: body, timeout: .seconds(2))
        } catch let error as JetStreamError where error.code == 10058 {
            return
        }
    }

    /// Reads the latest message of every subject matching `pattern` (through an ephemeral push consumer that
    /// delivers the last message per subject, then is gone), calling `receive` on the event loop with each.
    /// `waiting` is handed, on the event loop, the promise the replay waits on, so that its owner can fail it when
    /// it lets go of the connection (a promise left pending when the event loop shuts down is a leak).
    func replay(
        pattern: TopicPattern,
        over connection: NATSConnection,
        waiting: @escaping @Sendable (EventLoopPromise<Void>) -> Void,
        receive: @escaping @Sendable (NATSMessage) -> Void
    ) async throws {
        let eventLoop = connection.eventLoop
        let inbox = "_INBOX.\(UInt64.random(in: 1...UInt64.max))"
        let done = eventLoop.makePromise(of: Void.self)
        let sid = try await eventLoop.submit {
            waiting(done)
            return connection.subscribe(to: inbox) { message in
                // Only what the stream delivers: the inbox is in the request any client of the server may see.
                guard let delivery = JetStreamDelivery(replySubject: message.replyTo), delivery.stream == streamName else { return }
                receive(message)
                if delivery.pending == 0 { done.succeed(()) }
            }
        }.get()
        defer { eventLoop.execute { connection.unsubscribe(sid) } }
        try await connection.flush()
        let body = """
            {"stream_name":\(JSONScan.quoted(streamName)),"config":{"deliver_subject":\(JSONScan.quoted(inbox)),\
            "deliver_policy":"last_per_subject","ack_policy":"none","replay_policy":"instant",\
            "filter_subject":\(JSONScan.quoted(subjectRoot + "." + pattern.text)),"mem_storage":true,\
            "inactive_threshold":5000000000,"num_replicas":1}}
            """
        let reply = try await JetStreamAPI(connection).request("CONSUMER.CREATE." + streamName, body: body)
        if JSONScan.integer("num_pending", in: reply) == 0 { done.succeed(()) }
        let timeout = eventLoop.scheduleTask(in: .seconds(30)) {
            done.fail(NATSError("the latest messages of \(pattern) did not all come within 30 s"))
        }
        defer { timeout.cancel() }
        try await done.futureResult.get()
    }
}
