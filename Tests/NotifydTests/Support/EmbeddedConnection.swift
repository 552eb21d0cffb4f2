import Logging
import NIOCore
import NIOEmbedded
import NotifyBus
import NotifyBroker

@testable import NotifyDaemon

/// A connection to `broker` through the daemon's real `BrokerConnectionHandler`, on an embedded channel: a peer of
/// `uid`, bytes in and out by hand, and the event loop's clock moved by the test.
func embeddedConnection(to broker: Broker, uid: UInt32 = 1000) throws -> EmbeddedChannel {
    let handler = BrokerConnectionHandler(
        broker: broker,
        decoder: RequestDecoder(limits: broker.configuration.protocolLimits),
        logger: Logger(label: "test"),
        identify: { _ in PeerCredentials(pid: 1, uid: uid, gid: uid) }
    )
    let channel = EmbeddedChannel(handler: handler)
    try channel.connect(to: SocketAddress(unixDomainSocketPath: "/tmp/embedded-connection")).wait()
    return channel
}

/// Everything the connection wrote since the last call, as text.
func writtenText(_ channel: EmbeddedChannel) throws -> String {
    var text = ""
    while let buffer = try channel.readOutbound(as: ByteBuffer.self) { text += String(buffer: buffer) }
    return text
}
