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

    /// Lets go of the room of connections that closed, once there is much more of it than connections (called when
    /// the daemon is idle).
    func releaseIdleMemory() {
        guard transports.capacity > 2 * transports.count + 64 else { return }
        var compact = [ObjectIdentifier: ChannelTransport](minimumCapacity: transports.count)
        for (key, transport) in transports { compact[key] = transport }
        transports = compact
    }

    /// When each open connection will be closed.
    var closeFutures: [EventLoopFuture<Void>] { transports.values.map(\.closeFuture) }
}
