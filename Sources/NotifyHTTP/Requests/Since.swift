import HTTPTypes
import NotifyBus

/// Where a stream starts, from its `?since=` (ntfy's forms): what the daemon's history holds from that point comes
/// first, then live messages.
enum Since: Equatable, Sendable {
    /// Live messages only (no `since`, or `since=none`).
    case none
    /// Everything the history holds (`all`).
    case all
    /// Each topic's buffered message first (`latest`).
    case latest
    /// Messages published at or after this time: `10m` (a duration back from now: `s`, `m`, `h`, `d`) or a Unix
    /// time in seconds.
    case time(PublishTime)
    /// Messages after this one (an ``MessageID`` from an earlier event).
    case message(MessageID)

    /// The most seconds a duration may say: about 100 years, so that it cannot overflow a time.
    static let longestDuration: UInt64 = 100 * 366 * 86_400

    /// Reads `text` as of `now`.
    init(parsing text: Substring, now: PublishTime) throws(GatewayError) {
        switch text {
        case "", "none": self = .none
        case "all": self = .all
        case "latest": self = .latest
        default:
            if let id = MessageID(text) {
                self = .message(id)
            } else if let seconds = UInt64(text), seconds <= UInt64.max / 1_000_000 {
                self = .time(PublishTime(microsecondsSinceEpoch: seconds * 1_000_000))
            } else if let unit = text.last, let scale = Since.seconds(per: unit), let count = UInt64(text.dropLast()),
                count <= Since.longestDuration / scale
            {
                let back = count * scale * 1_000_000
                self = .time(PublishTime(microsecondsSinceEpoch: now.microsecondsSinceEpoch - min(back, now.microsecondsSinceEpoch)))
            } else {
                throw GatewayError(.badRequest, "since=\(text.prefix(64)) is none of all, latest, none, a duration (10m, 2h, 1d), a Unix time in seconds, or a message id")
            }
        }
    }

    private static func seconds(per unit: Character) -> UInt64? {
        switch unit {
        case "s": 1
        case "m": 60
        case "h": 3_600
        case "d": 86_400
        default: nil
        }
    }

    /// The daemon's resume point for a subscription to `patterns`; nil when it does not resume (live only, or the
    /// buffered messages first).
    func resumePoint(for patterns: [TopicPattern]) -> ResumePoint? {
        switch self {
        case .none, .latest:
            return nil
        case .all:
            return .time(PublishTime(microsecondsSinceEpoch: 0))
        case .time(let time):
            // The daemon resumes after a time; ntfy's `since` is from it on.
            return .time(PublishTime(microsecondsSinceEpoch: time.microsecondsSinceEpoch - min(1, time.microsecondsSinceEpoch)))
        case .message(let id):
            // One topic named in full resumes after the message's number exactly; patterns resume from its time,
            // so that what was published in the same instant on other topics is repeated rather than lost.
            if patterns.count == 1, patterns[0].isLiteral { return .sequence(id.sequence) }
            return .time(PublishTime(microsecondsSinceEpoch: id.time.microsecondsSinceEpoch - min(1, id.time.microsecondsSinceEpoch)))
        }
    }
}
