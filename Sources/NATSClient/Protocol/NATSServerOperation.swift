public import NIOCore

/// What a NATS server sends a client (the NATS client protocol, "Protocol messages": `INFO`, `MSG`, `HMSG`, `PING`,
/// `PONG`, `+OK`, `-ERR`).
public enum NATSServerOperation: Sendable, Hashable {
    /// The server's information, as the JSON object it sent: on connect, and again when the cluster changes.
    case info(String)
    /// A message for subscription `sid`.
    case message(NATSMessage)
    case ping
    case pong
    case ok
    /// An error; the server closes the connection after most of them.
    case error(String)
}

/// A message delivered by the server.
public struct NATSMessage: Sendable, Hashable {
    public var subject: String
    /// The subscription it is for, as the client named it in `SUB`.
    public var sid: String
    /// Where a reply goes (a request's inbox), if anywhere.
    public var replyTo: String?
    /// Its headers (an `HMSG`), if any.
    public var headers: NATSHeaders?
    public var payload: ByteBuffer

    public init(subject: String, sid: String, replyTo: String? = nil, headers: NATSHeaders? = nil, payload: ByteBuffer) {
        self.subject = subject
        self.sid = sid
        self.replyTo = replyTo
        self.headers = headers
        self.payload = payload
    }
}
