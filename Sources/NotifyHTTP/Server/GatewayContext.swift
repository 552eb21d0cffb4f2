public import Hummingbird
public import NIOCore

/// What the gateway's checks read of a request's connection, for plain requests and WebSocket upgrades alike.
public protocol GatewayRequestContext: RequestContext {
    /// The client's address; nil for a client of a Unix socket.
    var remoteAddress: SocketAddress? { get }
    /// The address the client reached: the one a `Host` header must name.
    var localAddress: SocketAddress? { get }
}

extension GatewayRequestContext {
    /// What the bounds per client count the client by: its local user over loopback, else its address's range (see
    /// ``ClientRange``).
    var client: String { ClientRange.key(of: remoteAddress, local: localAddress) }
}

/// A request's context: Hummingbird's, and the addresses of its connection.
public struct GatewayContext: GatewayRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let remoteAddress: SocketAddress?
    public let localAddress: SocketAddress?

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.remoteAddress = source.channel.remoteAddress
        self.localAddress = source.channel.localAddress
    }
}
