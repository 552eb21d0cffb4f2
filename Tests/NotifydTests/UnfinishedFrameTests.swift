import NIOCore
import NIOEmbedded
import NotifyBus
import NotifyBroker
import Testing

@testable import NotifyDaemon

/// Issue 14, "Half-sent frames": what a connection holds of requests it did not finish is bounded per uid and in
/// total, and a request that stops mid-way does not hold it for good.
@Suite("Unfinished requests (no socket)", .timeLimit(.minutes(3)))
struct UnfinishedFrameTests {
    @Test("a request that gets no byte more for 30 s closes its connection; one that makes progress does not")
    func stalledFrame() throws {
        let broker = Broker()
        let slow = try embeddedConnection(to: broker)
        let stalled = try embeddedConnection(to: broker)
        _ = (try writtenText(slow), try writtenText(stalled))
        try slow.writeInbound(ByteBuffer(string: "PUB t 10\nab"))
        try stalled.writeInbound(ByteBuffer(string: "PUB t 10\nab"))
        slow.embeddedEventLoop.advanceTime(by: .seconds(20))
        try slow.writeInbound(ByteBuffer(string: "cd"))
        slow.embeddedEventLoop.advanceTime(by: .seconds(20))
        stalled.embeddedEventLoop.advanceTime(by: .seconds(40))
        #expect(slow.isActive, "it sent more within 30 s")
        #expect(!stalled.isActive, "nothing came for 30 s")
        #expect(try writtenText(stalled).hasPrefix("ERR malformed a request stopped mid-way and nothing more came for 30 s"))
        try slow.writeInbound(ByteBuffer(string: "efghij\n#1 PING\n"))
        #expect(try writtenText(slow) == "#1 PONG\n", "it finished its request and goes on")
        #expect(broker.statistics.messagesIn == 1)
    }

    @Test("one uid's unfinished requests share a budget: the connection that goes over is closed, others are not")
    func perUserBudget() throws {
        var configuration = BrokerConfiguration.default
        configuration.maxUnreadBytesPerUser = 3_000
        let broker = Broker(configuration: configuration)
        let payload = String(repeating: "x", count: 1_000)
        let first = try embeddedConnection(to: broker, uid: 1000)
        let second = try embeddedConnection(to: broker, uid: 1000)
        let other = try embeddedConnection(to: broker, uid: 1001)
        _ = (try writtenText(first), try writtenText(second), try writtenText(other))
        try first.writeInbound(ByteBuffer(string: "PUB t 4000\n" + payload))
        #expect(first.isActive)
        try second.writeInbound(ByteBuffer(string: "PUB t 4000\n" + payload + payload))
        #expect(!second.isActive, "together over 3,000 bytes")
        #expect(try writtenText(second).hasPrefix("ERR limit uid 1000's connections hold 3000 bytes of requests not finished yet"))
        try other.writeInbound(ByteBuffer(string: "PUB t 4000\n" + payload + payload))
        #expect(other.isActive, "another uid has a budget of its own")
        try first.writeInbound(ByteBuffer(string: String(repeating: "y", count: 3_000) + "\n#2 PING\n"))
        #expect(try writtenText(first) == "#2 PONG\n", "finishing a request gives its bytes back")
    }
}
