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
    /// How long a stream's reader may take nothing, with events waiting, before it counts as stopped: until then a
    /// full stream holds its subscription back (the daemon queues); after, it drops its oldest.
    public var streamStall: Duration

    /// The default of ``streamBuffer``: with the socket's send buffer (an eighth of it asked, a quarter once the
    /// kernel doubles it), the batch being written and the one in hand (64 KiB each) and the subscription's own
    /// (128 KiB at most), a stream whose reader stopped holds about 900 KiB, under 1 MiB.
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
        streamStall: Duration = .seconds(2),
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
        self.streamStall = streamStall
    }
}
