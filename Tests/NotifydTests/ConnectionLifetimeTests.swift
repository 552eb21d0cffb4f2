import Logging
import NIOCore
import NIOEmbedded
import NotifyBus
import NotifyBroker
import Testing

@testable import NotifyDaemon

/// What a connection costs after it is gone: nothing. (Its handler, transport and channel once held each other, so a
/// daemon grew by about 600 bytes per connection ever made.)
@Suite("Connection lifetime (no socket)", .timeLimit(.minutes(3)))
struct ConnectionLifetimeTests {
    @Test("a closed connection lets go of its handler and transport, after subscribing and being written to")
    func closedConnectionIsFreed() throws {
        let broker = Broker(configuration: .default)
        weak var released: BrokerConnectionHandler?
        do {
            let handler = BrokerConnectionHandler(
                broker: broker,
                decoder: RequestDecoder(limits: broker.configuration.protocolLimits),
                logger: Logger(label: "test"),
                identify: { _ in PeerCredentials(pid: 1, uid: 1000, gid: 1000) }
            )
            released = handler
            let channel = EmbeddedChannel(handler: handler)
            try channel.connect(to: SocketAddress(unixDomainSocketPath: "/tmp/embedded-connection")).wait()
            try channel.writeInbound(ByteBuffer(string: "SUB t\nPUB t 2\nhi\n"))
            #expect(try writtenText(channel).contains("MSG t 1"))
            _ = try channel.finish(acceptAlreadyClosed: true)
        }
        #expect(released == nil, "the handler (and the transport and channel it held) outlived its connection")
        #expect(broker.statistics.connections == 0)
    }
}
