import NIOCore
import NIOEmbedded
import NotifyBus
import NotifyBroker
import Testing

@testable import NotifyDaemon

/// Issue 14, "Cheap requests with O(topics) work": one connection's burst of requests is carried out in turns, so
/// the event loop gets to the others (and to the watchdog) in between.
@Suite("Turns of work per connection (no socket)", .timeLimit(.minutes(3)))
struct TurnTakingTests {
    static func pongs(in channel: EmbeddedChannel) throws -> Int {
        try writtenText(channel).split(separator: "\n").filter { $0 == "PONG" }.count
    }

    @Test("a read of 3,000 requests is carried out in turns of about a thousand, the rest after other work")
    func burstInTurns() throws {
        let broker = Broker()
        let channel = try embeddedConnection(to: broker)
        _ = try Self.pongs(in: channel)  // the greeting
        try channel.writeInbound(ByteBuffer(string: String(repeating: "PING\n", count: 3_000)))
        #expect(try Self.pongs(in: channel) == BrokerConnectionHandler.workPerTurn, "one turn, then the loop's other work")
        channel.embeddedEventLoop.run()
        #expect(try Self.pongs(in: channel) == 3_000 - BrokerConnectionHandler.workPerTurn, "the rest, in the turns after")
    }

    @Test("the reads of one read loop share one turn, and what comes after the turn ended waits for the next")
    func oneTurnPerReadLoop() throws {
        let broker = Broker()
        let channel = try embeddedConnection(to: broker)
        _ = try Self.pongs(in: channel)
        // As NIO does when a socket has more than one buffer's worth: several reads, then one read-complete.
        for _ in 0..<3 { channel.pipeline.fireChannelRead(ByteBuffer(string: String(repeating: "PING\n", count: 800))) }
        channel.pipeline.fireChannelReadComplete()
        #expect(try Self.pongs(in: channel) == BrokerConnectionHandler.workPerTurn, "one turn for the three reads")
        channel.embeddedEventLoop.run()
        #expect(try Self.pongs(in: channel) == 2_400 - BrokerConnectionHandler.workPerTurn)
    }

    @Test("a connection that closes while requests wait for their turn still publishes what it sent")
    func closeWhileWaiting() throws {
        let broker = Broker()
        let channel = try embeddedConnection(to: broker)
        try channel.writeInbound(ByteBuffer(string: String(repeating: "PING\n", count: 2_000) + "PUB t 4\nlast\n"))
        _ = try channel.finish()
        #expect(broker.statistics.messagesIn == 1, "the PUB behind the PINGs was carried out")
    }
}
