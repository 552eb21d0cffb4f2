import NIOCore
import Synchronization
import NotifyProtocol

/// How much a subscription holds for its consumer before the connection stops taking more from the daemon.
///
/// A subscription's events wait in the client until its consumer takes them. Once they reach either high-water
/// mark, the client asks the daemon to hold this connection's deliveries back (`OPT pause`), so that they queue in
/// the daemon under the subscription's ``/NotifyProtocol/OverflowPolicy`` and what the daemon drops is announced in order with
/// `DROP`; replies still come. Once the consumer is back under both low-water marks, the deliveries flow again
/// (`OPT resume`). Whatever the daemon does, a subscription holds at most twice the high-water marks, plus what the
/// read that crossed them brought (at most 64 KiB of frames) and the drop notices below: there the client stops
/// reading the socket until the consumer catches up, unless someone waits for a reply; then it reads on, and what
/// comes for the full subscription is dropped and announced to its consumer in its place.
public struct SubscriptionBufferLimits: Sendable, Hashable {
    /// The events held that make the client hold back.
    public var highEvents: Int
    /// Their size in bytes (payload, topic and a fixed overhead per event) that make it hold back.
    public var highBytes: Int

    /// The default: 1,024 events or 1 MiB. A consumer that stalls costs its process about that much.
    public static let `default` = SubscriptionBufferLimits(highEvents: 1_024, highBytes: 1 << 20)

    /// Creates limits; each is at least 1.
    public init(highEvents: Int, highBytes: Int) {
        self.highEvents = max(1, highEvents)
        self.highBytes = max(1, highBytes)
    }

    /// Deliveries flow again once the consumer took the subscription under half of both high-water marks: not at
    /// every event, which would pause and resume all the time.
    var lowEvents: Int { highEvents / 2 }
    var lowBytes: Int { highBytes / 2 }

    /// Where the client stops reading, twice the high-water marks: what the daemon sent before it read `OPT pause`
    /// usually fits below, but a consumer much slower than the client's reading, or a daemon that cannot pause,
    /// reaches it.
    var hardLimit: (events: Int, bytes: Int) { (2 * highEvents, 2 * highBytes) }
}

/// Counts what one subscription holds for its consumer, and says when that crosses the limits: the event loop
/// adds what it hands over, the consumer's task takes away what it took.
package final class SubscriptionGauge: Sendable {
    let limits: SubscriptionBufferLimits

    private struct Level {
        var events = 0
        var bytes = 0
        /// Over a high-water mark, and not yet back under both low-water marks.
        var isFull = false
    }

    private let level = Mutex(Level())

    package init(limits: SubscriptionBufferLimits) {
        self.limits = limits
    }

    /// Where a subscription stands after an event was added.
    enum Fill {
        /// Under its high-water marks, or caught up since it went over.
        case roomy
        /// This event took it over a high-water mark.
        case becameFull
        /// Over a high-water mark still, and under its hard limit.
        case full
        /// At its hard limit: the connection must not read more for it.
        case atHardLimit
    }

    /// Counts an event handed to the consumer, and says where that leaves the subscription.
    func add(_ size: Int) -> Fill {
        level.withLock { level in
            level.events += 1
            level.bytes += size
            if level.isFull {
                let hard = limits.hardLimit
                return level.events >= hard.events || level.bytes >= hard.bytes ? .atHardLimit : .full
            }
            guard level.events >= limits.highEvents || level.bytes >= limits.highBytes else { return .roomy }
            level.isFull = true
            return .becameFull
        }
    }

    /// Counts an event the consumer took. Returns true when this took a full subscription back under its low-water
    /// marks.
    package func take(_ size: Int) -> Bool {
        take(events: 1, bytes: size)
    }

    /// Counts `events` events of `bytes` in all that the consumer is done with. Returns true when this took a full
    /// subscription back under its low-water marks.
    package func take(events: Int, bytes: Int) -> Bool {
        level.withLock { level in
            level.events -= events
            level.bytes -= bytes
            guard level.isFull, level.events <= limits.lowEvents, level.bytes <= limits.lowBytes else { return false }
            level.isFull = false
            return true
        }
    }

    /// Whether the subscription is over a high-water mark and its consumer has not caught up yet.
    var isFull: Bool { level.withLock { $0.isFull } }

    /// Whether it holds its hard limit: the connection must not read more for it.
    var isAtHardLimit: Bool {
        let hard = limits.hardLimit
        return level.withLock { $0.events >= hard.events || $0.bytes >= hard.bytes }
    }

    /// Events and bytes held now, for tests and diagnostics.
    package var held: (events: Int, bytes: Int) { level.withLock { ($0.events, $0.bytes) } }
}

extension SubscriptionEvent {
    /// What the event costs while it waits for the consumer, roughly: its bytes, and what holds them.
    package var bufferedSize: Int {
        switch self {
        case .message(let delivery):
            return 96 + delivery.topic.name.utf8.count + delivery.payload.readableBytes + (delivery.publisher.unit?.utf8.count ?? 0)
        case .dropped(let notice):
            return 64 + notice.topic.name.utf8.count
        }
    }
}
