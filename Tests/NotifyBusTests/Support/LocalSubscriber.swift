import NIOCore
import NIOEmbedded

@testable import NotifyBus
@testable import NotifyProtocol

/// A local subscription of a client handler whose events a test reads afterwards: for tests of the handler without
/// a socket.
final class LocalSubscriber {
    /// Where its events go, as a ``NotifySubscription``'s do: gathered per read and handed over together.
    let inbox = SubscriptionInbox()
    let local: ClientChannelHandler.LocalSubscription

    init(_ patterns: String..., gauge: SubscriptionGauge = SubscriptionGauge(limits: .default)) throws {
        local = ClientChannelHandler.LocalSubscription(
            patterns: try patterns.map { try TopicPattern($0) },
            output: .inbox(inbox),
            gauge: gauge
        )
    }

    /// Everything handed to its consumer, in order (ends it).
    func events() async throws -> [SubscriptionEvent] {
        inbox.finish(nil)
        var events: [SubscriptionEvent] = []
        while let batch = try await inbox.take() { events += batch.events }
        return events
    }

    /// The sequence numbers handed to its consumer, in order (ends it).
    func sequences() async throws -> [UInt64] {
        try await events().compactMap { event in
            if case .message(let delivery) = event { return delivery.sequence }
            return nil
        }
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
