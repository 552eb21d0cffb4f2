/// What JetStream says of a message a consumer delivered, in its reply subject:
/// `$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<time>.<pending>`, or the newer form with a
/// domain and an account hash before the stream and a token after the pending count.
public struct JetStreamDelivery: Sendable, Equatable {
    /// The stream and the consumer that delivered it.
    public var stream: String
    public var consumer: String
    /// The message's number in its stream.
    public var streamSequence: UInt64
    /// How many messages the consumer still has for its reader after this one.
    public var pending: UInt64

    /// A delivery of these numbers.
    public init(stream: String, consumer: String, streamSequence: UInt64, pending: UInt64) {
        self.stream = stream
        self.consumer = consumer
        self.streamSequence = streamSequence
        self.pending = pending
    }

    /// Reads `replySubject`; nil when it is no JetStream acknowledgement subject.
    public init?(replySubject: String?) {
        guard let replySubject, replySubject.hasPrefix("$JS.ACK.") else { return nil }
        let tokens = replySubject.split(separator: ".", omittingEmptySubsequences: false)
        let offset: Int
        switch tokens.count {
        case 9: offset = 0
        case 12...: offset = 2
        default: return nil
        }
        guard let sequence = UInt64(tokens[5 + offset]), let pending = UInt64(tokens[8 + offset]) else { return nil }
        stream = String(tokens[2 + offset])
        consumer = String(tokens[3 + offset])
        streamSequence = sequence
        self.pending = pending
    }
}
