import NIOCore

/// The daemon's open connections, to wait for on shutdown while they are sent what they are owed.
///
/// Each connection's handler adds its transport when the connection becomes active and removes it when it goes
/// inactive, so that tracking one costs a table entry and no callback of its own. Owned by the server's event loop.
final class OpenConnections {
    private var transports: [ObjectIdentifier: ChannelTransport] = [:]

    func add(_ transport: ChannelTransport) {
        transports[ObjectIdentifier(transport)] = transport
    }

    func remove(_ transport: ChannelTransport) {
        transports[ObjectIdentifier(transport)] = nil
    }

    /// When each open connection will be closed.
    var closeFutures: [EventLoopFuture<Void>] { transports.values.map(\.closeFuture) }
}
