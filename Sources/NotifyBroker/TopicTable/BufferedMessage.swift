import NIOCore
import NotifyProtocol

/// A topic's buffered latest message as the broker reads it (``TopicState/retained``): a block of its own
/// (``RetainedMessage``), or the record of its history that is the same message (``TopicState/retainedInHistory``).
/// Valid until the topic's state or history next changes.
struct BufferedMessage {
    let sequence: UInt64
    let payloadSize: Int
    /// Bytes of its `MSG` frame.
    let frameLength: Int
    /// Who published it, whose limit per user it counts against.
    let owner: UserAccount
    private let source: Source

    private enum Source {
        case block(RetainedMessage)
        case history(TopicHistory, TopicHistory.Entry, topic: String)
    }

    init(_ block: RetainedMessage) {
        sequence = block.sequence
        payloadSize = block.payloadSize
        frameLength = block.frameLength
        owner = block.owner
        source = .block(block)
    }

    init(_ entry: TopicHistory.Entry, in history: TopicHistory, of topic: String) {
        sequence = entry.sequence
        payloadSize = entry.payloadSize
        frameLength = entry.length
        owner = entry.owner
        source = .history(history, entry, topic: topic)
    }

    /// Calls `body` with the frame's bytes, valid during the call only.
    func withFrame<Result>(_ body: (UnsafeRawBufferPointer) -> Result) -> Result {
        switch source {
        case .block(let block): block.withFrame(body)
        case .history(let history, let entry, let topic): history.withFrame(of: entry, topic: topic, body)
        }
    }

    /// A copy of the frame in a buffer of its own.
    var frame: ByteBuffer { withFrame { ByteBuffer(bytes: $0) } }

    /// How much of a connection's turn (``Broker/workDone``) sending a copy of this frame is worth: one request,
    /// and one more per KiB. Without it, a client that pipelines a thousand `LATEST` of a 1 MiB message while its
    /// replies wait for the state log could have the daemon copy a gigabyte in one turn.
    var replyWork: Int { frameLength >> 10 }
}
