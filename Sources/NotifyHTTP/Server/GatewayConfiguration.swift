/// What the gateway needs to know besides its listening address.
public struct GatewayConfiguration: Sendable {
    /// The daemon's socket, resolved as `notify` resolves it.
    public var socketPath: String
    /// How often a stream gets a `keepalive` event (ntfy's 45 s).
    public var keepalive: Duration
    /// The bearer tokens it takes; nil takes requests without one.
    public var tokens: TokenTable?
    /// The most streams open at once, in total and per client address (each holds a connection to the daemon).
    public var maxStreams: Int
    public var maxStreamsPerAddress: Int

    /// Creates a configuration.
    public init(
        socketPath: String,
        keepalive: Duration = .seconds(45),
        tokens: TokenTable? = nil,
        maxStreams: Int = 256,
        maxStreamsPerAddress: Int = 16
    ) {
        self.socketPath = socketPath
        self.keepalive = keepalive
        self.tokens = tokens
        self.maxStreams = maxStreams
        self.maxStreamsPerAddress = maxStreamsPerAddress
    }
}
