import NIOCore
import NIOEmbedded
import Testing

@testable import NotifyBus
@testable import NotifyProtocol

/// How the client hands a delivery to its local subscriptions, without a socket: each matching one once, and the
/// topics it remembers the subscriptions of forgotten whenever the subscriptions change.
@Suite("Client routing (no socket)", .timeLimit(.minutes(3)))
struct ClientRoutingTests {
    @Test("a subscription made after a topic was routed gets its next messages; one removed gets no more; overlapping patterns get a message once")
    func cacheFollowsSubscriptions() async throws {
        let (channel, handler) = try greetedClientHandler()
        func deliver(_ sequence: UInt64) throws {
            try channel.writeInbound(ByteBuffer(string: "MSG a.b \(sequence) 1795305600000000 1000 1 - 1\nx\n"))
        }
        let first = try LocalSubscriber("a.b", "a.>", "*.b")
        let firstID = handler.addSubscription(first.local).id
        try deliver(1)
        let second = try LocalSubscriber("a.*")
        _ = handler.addSubscription(second.local)
        try deliver(2)
        handler.removeSubscription(firstID)
        try deliver(3)
        #expect(try await first.sequences() == [1, 2], "once each, though three of its patterns match; none after it was removed")
        #expect(try await second.sequences() == [2, 3], "from the message after it was made")
    }

    @Test("overlapping patterns each asked for the latest: the buffered message they both bring is handed over once, also after a newer live one")
    func latestOfOverlappingPatternsOnce() async throws {
        let (channel, handler) = try greetedClientHandler()
        let subscriber = try LocalSubscriber("x.>", "x.y")
        let (id, patterns) = handler.addSubscription(subscriber.local)
        for pattern in patterns {
            handler.send(.subscribe(pattern, SubscribeOptions(latestFirst: true)), reply: nil, written: nil, replaysFor: id)
        }
        let frame = { (prefix: String, sequence: Int) in "\(prefix) x.y \(sequence) 1795305600000000 1000 1 - 1\nx\n" }
        // The first SUB's buffered message and OK, a live message after it, then the second SUB's copy of the same
        // buffered message, now older than what was delivered.
        try channel.writeInbound(ByteBuffer(string: frame("#1 LAST", 5) + "#1 OK\n" + frame("MSG", 6) + frame("#2 LAST", 5) + "#2 OK\n"))
        try channel.writeInbound(ByteBuffer(string: frame("MSG", 7)))
        #expect(try await subscriber.sequences() == [5, 6, 7])
    }
}
