public import NotifyBus

/// A kind of notification that Swift programs post to one another through notifyd: a value that names the topic it
/// is published to and how it is encoded.
///
/// ```swift
/// struct BackupFinished: NotifyMessage, Codable {
///     static let topic = Topic.literal("backup.finished")
///     var host: String
///     var bytes: Int
/// }
/// try await center.post(BackupFinished(host: "db1", bytes: 1 << 30))
/// ```
///
/// A type whose values each name a topic of their own below a family (one topic per host, say) derives it from the
/// value and widens ``topics`` to the family, so that the daemon buffers the latest of each:
///
/// ```swift
/// struct DiskUsage: NotifyMessage, Codable {
///     static let topic = Topic.literal("disk.usage")
///     static var topics: TopicPattern { .descendants(of: topic) }   // disk.usage.>
///     var topic: Topic { Self.topic.appending(host) }               // disk.usage.db1
///     var host: String
///     var percent: Double
/// }
/// ```
///
/// A `Codable` type is encoded as JSON (``NotifyCodec/json``), so that `notify subscribe --format raw | jq` and
/// `notify send` speak it too; give ``codec`` another value for a binary encoding.
public protocol NotifyMessage: Sendable {
    /// The topic of this type's notifications, or the root of the topics its values derive.
    static var topic: Topic { get }
    /// What a subscription to every notification of this type follows: ``topic-type.property`` itself unless the type says
    /// otherwise.
    static var topics: TopicPattern { get }
    /// How values are turned into payloads and back.
    static var codec: NotifyCodec<Self> { get }
    /// The topic this value is posted to: ``topic`` unless the type derives one from the value.
    var topic: Topic { get }
}

extension NotifyMessage {
    public static var topics: TopicPattern { TopicPattern(topic) }
    public var topic: Topic { Self.topic }
}

extension NotifyMessage where Self: Codable {
    public static var codec: NotifyCodec<Self> { .json }
}

extension Topic {
    /// A topic name known to be valid when the program is written; a name that is not valid stops the program with
    /// the reason, as a literal regular expression that does not compile would.
    public static func literal(_ name: String) -> Topic {
        do {
            return try Topic(name)
        } catch {
            preconditionFailure("\"\(name)\" is not a valid topic: \(error)")
        }
    }

    /// The topic one level below this one, named `token`: `disk.usage` and `db1` make `disk.usage.db1`. Characters
    /// a token may not hold (`.`, `*`, `>`, whitespace and controls) are replaced with `_`, so that any key (a host
    /// name with dots, say) gives one topic of the family and never a pattern; a key too long for the name is cut.
    public func appending(_ token: String) -> Topic {
        var room = Topic.maxLength - name.utf8.count - 1
        precondition(room >= 1, "the family \(name) is too long to name a topic below it")
        var cleaned = String.UnicodeScalarView()
        for scalar in token.unicodeScalars {
            let forbidden = scalar == "." || scalar == "*" || scalar == ">" || scalar.value <= 0x20 || scalar.value == 0x7F
                || scalar.properties.isWhitespace || scalar.properties.generalCategory == .control
            let kept: Unicode.Scalar = forbidden ? "_" : scalar
            // Too long a key is cut to fit: the family's topics stay apart as long as keys differ early.
            room -= kept.utf8.count
            guard room >= 0 else { break }
            cleaned.append(kept)
        }
        if cleaned.isEmpty { cleaned.append("_") }
        do {
            return try Topic(name + "." + String(cleaned))
        } catch {
            preconditionFailure("\(name) and a cleaned key made no topic: \(error)")
        }
    }
}

extension TopicPattern {
    /// Every topic below `topic` (`topic.>`): a family of topics that values derive from a key.
    public static func descendants(of topic: Topic) -> TopicPattern {
        do {
            return try TopicPattern(topic.name + ".>")
        } catch {
            preconditionFailure("\"\(topic.name).>\" is not a valid pattern: \(error)")
        }
    }
}
