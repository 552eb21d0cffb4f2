/// What the gateway needs to know besides its listening address.
public struct GatewayConfiguration: Sendable {
    /// The daemon's socket, resolved as `notify` resolves it.
    public var socketPath: String
    /// How often a stream gets a `keepalive` event (ntfy's 45 s).
    public var keepalive: Duration
    /// The bearer tokens it takes; nil takes requests without one.
    public var tokens: TokenTable?
    /// The `Host` and `Origin` headers it answers.
    public var sameOrigin: SameOriginPolicy
    /// The most streams open at once, in total and per client range (see ``ClientRange``).
    public var maxStreams: Int
    public var maxStreamsPerAddress: Int
    /// The most topics and bytes one client range may hold retained through the gateway: its share of what the
    /// daemon allows the gateway's user (by default a quarter of the daemon's 100,000 topics and 64 MiB per user).
    public var maxRetainedTopicsPerAddress: Int
    public var maxRetainedBytesPerAddress: Int
    /// The most bytes of events one stream holds for a reader that does not keep up; past it, its oldest are
    /// dropped, and the reader is told how many when it reads again.
    public var streamBuffer: Int
    /// How many connections to the daemon the streams share (each stream's subscription on the least loaded).
    public var streamConnections: Int

    /// The default of ``streamBuffer``: with the socket's send buffer (an eighth of it asked, a quarter once the
    /// kernel doubles it) and the batch being written (64 KiB), a stream whose reader stopped holds about 600 KiB.
    public static let defaultStreamBuffer = 512 << 10

    /// Creates a configuration.
    public init(
        socketPath: String,
        keepalive: Duration = .seconds(45),
        tokens: TokenTable? = nil,
        sameOrigin: SameOriginPolicy = SameOriginPolicy(),
        maxStreams: Int = 256,
        maxStreamsPerAddress: Int = 16,
        streamBuffer: Int = GatewayConfiguration.defaultStreamBuffer,
        streamConnections: Int = 4,
        maxRetainedTopicsPerAddress: Int = 25_000,
        maxRetainedBytesPerAddress: Int = 16 << 20
    ) {
        self.maxRetainedTopicsPerAddress = maxRetainedTopicsPerAddress
        self.maxRetainedBytesPerAddress = maxRetainedBytesPerAddress
        self.socketPath = socketPath
        self.keepalive = keepalive
        self.tokens = tokens
        self.sameOrigin = sameOrigin
        self.maxStreams = maxStreams
        self.maxStreamsPerAddress = maxStreamsPerAddress
        self.streamBuffer = streamBuffer
        self.streamConnections = max(1, streamConnections)
    }
}
