public import Hummingbird
public import NIOCore

/// A request's context: Hummingbird's, and the address it came from, which the gateway's bounds per client count by.
public struct GatewayContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The client's address; nil for a client of a Unix socket.
    public let remoteAddress: SocketAddress?

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.remoteAddress = source.channel.remoteAddress
    }

    /// The client's address without its port: what the bounds per client count by.
    var client: String { remoteAddress?.ipAddress ?? "local" }
}
