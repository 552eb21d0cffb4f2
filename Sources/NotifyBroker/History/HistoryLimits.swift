public import NotifyProtocol

/// How much history a topic keeps: its last messages, for subscribers that resume after a sequence number or a time
/// (`SUB … since=`) and for `HISTORY`.
public struct HistoryLimits: Sendable, Hashable {
    /// The most messages kept; 0 keeps none.
    public var messages: Int
    /// The most bytes of messages kept, each counted as its history holds it: the payload and a line of some 25
    /// bytes (publisher's uid, pid and unit, payload size; the topic, sequence number and time are the record's
    /// own, see ``TopicHistory``); 0 keeps none. A history never keeps more than 256 MiB, whatever this says.
    public var bytes: Int

    /// Creates limits.
    public init(messages: Int, bytes: Int) {
        self.messages = max(0, messages)
        self.bytes = max(0, bytes)
    }

    /// No history.
    public static let off = HistoryLimits(messages: 0, bytes: 0)

    /// The last 64 messages, at most 64 KiB of them: enough for a subscriber to resume across a restart of the
    /// daemon while publishers go on at a few hundred messages a second.
    public static let resumable = HistoryLimits(messages: 64, bytes: 64 << 10)

    /// Whether nothing is kept.
    public var isOff: Bool { messages == 0 || bytes == 0 }
}

/// History limits for the topics a pattern matches, in place of the default.
public struct HistoryRule: Sendable, Hashable {
    public var pattern: TopicPattern
    public var limits: HistoryLimits

    /// Creates a rule.
    public init(_ pattern: TopicPattern, _ limits: HistoryLimits) {
        self.pattern = pattern
        self.limits = limits
    }
}
