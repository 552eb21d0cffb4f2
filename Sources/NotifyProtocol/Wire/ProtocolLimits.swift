/// The sizes a server accepts, announced in its greeting so clients can refuse oversized input before sending it.
public struct ProtocolLimits: Sendable, Hashable {
    /// The largest payload of one message, in bytes.
    public var maxPayload: Int
    /// The longest topic or pattern, in bytes (at most ``Topic/maxLength``).
    public var maxTopic: Int
    /// The longest frame line before its line break, in bytes.
    public var maxLine: Int

    /// 1 MiB payloads, 255-byte topics, 1 KiB lines.
    public static let `default` = ProtocolLimits(maxPayload: 1 << 20, maxTopic: Topic.maxLength, maxLine: 1024)

    /// The largest `max_payload` a server may announce: what every client of this library accepts in a frame
    /// (``ServerFrameDecoder``), far inside a `ByteBuffer`'s 4 GiB.
    public static let largestPayload = 256 << 20

    /// Creates limits; `maxTopic` is capped at ``Topic/maxLength`` and `maxLine` raised so a line can hold a
    /// frame with the longest topic.
    public init(maxPayload: Int, maxTopic: Int, maxLine: Int) {
        self.maxPayload = max(0, maxPayload)
        self.maxTopic = min(max(1, maxTopic), Topic.maxLength)
        self.maxLine = max(maxLine, self.maxTopic + 128)
    }
}
