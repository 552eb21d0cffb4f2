import NIOCore
import NIOEmbedded

@testable import NotifyBus

/// A local subscription of a client handler whose events a test reads afterwards: for tests of the handler without
/// a socket.
final class LocalSubscriber {
    let stream: AsyncThrowingStream<SubscriptionEvent, any Error>
    let continuation: AsyncThrowingStream<SubscriptionEvent, any Error>.Continuation
    let local: ClientChannelHandler.LocalSubscription

    init(_ patterns: String...) throws {
        (stream, continuation) = AsyncThrowingStream.makeStream(of: SubscriptionEvent.self, throwing: (any Error).self)
        local = ClientChannelHandler.LocalSubscription(
            patterns: try patterns.map { try TopicPattern($0) },
            continuation: continuation,
            gauge: SubscriptionGauge(limits: .default)
        )
    }

    /// The sequence numbers handed to its consumer, in order (ends it).
    func sequences() async throws -> [UInt64] {
        continuation.finish()
        var sequences: [UInt64] = []
        for try await case .message(let delivery) in stream { sequences.append(delivery.sequence) }
        return sequences
    }
}

/// A client handler on an embedded channel, greeted by a daemon of `version`: for tests of the handler without a
/// socket.
func greetedClientHandler(version: UInt64 = 3) throws -> (EmbeddedChannel, ClientChannelHandler) {
    let channel = EmbeddedChannel()
    let handler = ClientChannelHandler(greeting: channel.eventLoop.makePromise(of: ServerGreeting.self))
    try channel.pipeline.syncOperations.addHandler(handler)
    try channel.writeInbound(ByteBuffer(string: "HELLO notifyd \(version) max_payload=1048576 max_topic=255 max_line=1024\n"))
    return (channel, handler)
}
