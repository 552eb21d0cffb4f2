/// What the gateway needs to know besides its listening address.
public struct GatewayConfiguration: Sendable {
    /// The daemon's socket, resolved as `notify` resolves it.
    public var socketPath: String
    /// How long a stream stays quiet before a `keepalive` event (ntfy's 45 s).
    public var keepalive: Duration

    /// Creates a configuration.
    public init(socketPath: String, keepalive: Duration = .seconds(45)) {
        self.socketPath = socketPath
        self.keepalive = keepalive
    }
}
