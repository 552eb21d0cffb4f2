public import NIOCore

/// What a NATS client sends the server (`CONNECT`, `PUB`, `HPUB`, `SUB`, `UNSUB`, `PING`, `PONG`), and how it is
/// written.
public enum NATSClientOperation: Sendable, Hashable {
    /// The client's options, as a JSON object (`{"verbose":false,"pedantic":false,"headers":true,…}`).
    case connect(String)
    /// Publishes `payload` to `subject`, with `headers` (`HPUB`) if given, asking replies to go to `replyTo`.
    case publish(subject: String, replyTo: String?, headers: NATSHeaders?, payload: ByteBuffer)
    /// Subscribes `sid` to `subject` (wildcards `*` and `>`), in a queue group if given.
    case subscribe(subject: String, queueGroup: String?, sid: String)
    /// Ends subscription `sid`, now or after `maxMessages` more.
    case unsubscribe(sid: String, maxMessages: Int?)
    case ping
    case pong
}

extension ByteBuffer {
    /// Writes `operation` as it goes on the wire.
    public mutating func writeNATSOperation(_ operation: NATSClientOperation) {
        switch operation {
        case .connect(let options):
            writeString("CONNECT \(options)\r\n")
        case .publish(let subject, let replyTo, let headers, var payload):
            let reply = replyTo.map { " " + $0 } ?? ""
            if let headers {
                let encoded = headers.encoded
                let headerSize = encoded.utf8.count
                writeString("HPUB \(subject)\(reply) \(headerSize) \(headerSize + payload.readableBytes)\r\n")
                writeString(encoded)
            } else {
                writeString("PUB \(subject)\(reply) \(payload.readableBytes)\r\n")
            }
            writeBuffer(&payload)
            writeString("\r\n")
        case .subscribe(let subject, let queueGroup, let sid):
            writeString("SUB \(subject)\(queueGroup.map { " " + $0 } ?? "") \(sid)\r\n")
        case .unsubscribe(let sid, let maxMessages):
            writeString("UNSUB \(sid)\(maxMessages.map { " \($0)" } ?? "")\r\n")
        case .ping:
            writeString("PING\r\n")
        case .pong:
            writeString("PONG\r\n")
        }
    }
}
