import NIOCore
import NIOEmbedded
import NotifyBus
import NotifyBroker
import Testing

@testable import NotifyDaemon

/// A subscriber disconnected for falling behind (`overflow=disconnect`) still publishes what it sent: what the
/// broker held back, and what its connection had read and not carried out yet.
@Suite("Disconnected subscribers (no socket)", .timeLimit(.minutes(3)))
struct DisconnectTests {
    @Test("its publishes waiting for their turn when it is disconnected are carried out, after those held back")
    func publishesWaitingForTheirTurn() throws {
        var configuration = BrokerConfiguration.default
        configuration.maxQueuedMessages = 1
        let broker = Broker(configuration: configuration)
        let watcher = try embeddedConnection(to: broker, uid: 1001)
        try watcher.writeInbound(ByteBuffer(string: "SUB u.*\n"))
        let slow = try embeddedConnection(to: broker, uid: 1000)
        try slow.writeInbound(ByteBuffer(string: "SUB t overflow=disconnect\n"))
        _ = (try writtenText(watcher), try writtenText(slow))

        // Its socket is full: what it sends is held back, a turn's worth; the rest waits for its turn.
        slow.isWritable = false
        slow.pipeline.fireChannelWritabilityChanged()
        let burst = "PUB u.first 1\n1\n" + String(repeating: "PING\n", count: 2 * BrokerConnectionHandler.workPerTurn) + "PUB u.last 1\n2\n"
        try slow.writeInbound(ByteBuffer(string: burst))
        let publisher = try embeddedConnection(to: broker, uid: 1002)
        try publisher.writeInbound(ByteBuffer(string: "PUB t 1\na\nPUB t 1\nb\nPUB t 1\nc\n"))
        #expect(!slow.isActive, "disconnected for falling behind")
        let delivered = try writtenText(watcher).split(separator: "\n").filter { $0.hasPrefix("MSG") }.map { $0.split(separator: " ")[1] }
        #expect(delivered == ["u.first", "u.last"], "both publishes went out, in the order sent")
    }
}
