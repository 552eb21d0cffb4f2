package import NotifyProtocol

/// What the bridge decides about a message from NATS before the broker sees it: taken in, skipped as a repeat of
/// one taken in already (a resend after a reconnect, the stream read again), or refused for a time this host does
/// not believe.
///
/// Repeats are recognised by origin: the last message taken in per topic, its host, number and time there. A host
/// whose state was wiped numbers from 1 again, but later, so a message is a repeat only when it is no newer by
/// both number and time. A time is a claim, and one far in the future would make every later real message of the
/// topic look like a repeat: such times are refused, and every repeat is counted, never skipped silently.
package struct ImportFilter {
    package init() {}

    package enum Decision: Equatable {
        case take
        /// No newer than the last message taken in from its host for its topic.
        case repeated
        /// Refused, for the reason given.
        case refused(String)
    }

    /// How far ahead of this host's clock a message's time may be, in microseconds: a minute, far more than
    /// synchronised clocks differ by, far less than a forged time would need to silence a host for long.
    package static let allowedClockLead: UInt64 = 60_000_000
    /// The most topics remembered; past it the table starts over (a repeat may then get through, at least once).
    package static let rememberedTopics = 100_000

    private var lastTaken: [Topic: (host: String, sequence: UInt64, time: UInt64)] = [:]
    /// Messages skipped as repeats.
    package private(set) var repeats: UInt64 = 0

    /// Decides about a message of `topic` from `host`, numbered `sequence` there at `time` (microseconds since the
    /// epoch; 0 when it says none), when this host's clock reads `now`.
    package mutating func decide(topic: Topic, host: String, sequence: UInt64, time: UInt64, now: UInt64) -> Decision {
        let (latestBelieved, overflow) = now.addingReportingOverflow(Self.allowedClockLead)
        if !overflow, time > latestBelieved {
            let seconds = (time - now) / 1_000_000
            return .refused(
                "its time is \(seconds) s ahead of this host's clock (more than \(Self.allowedClockLead / 1_000_000) s is refused); check the clocks of \(host) and this host"
            )
        }
        if sequence > 0, let last = lastTaken[topic], last.host == host, last.sequence >= sequence, last.time >= time {
            repeats += 1
            return .repeated
        }
        return .take
    }

    /// Whether a message of `topic` was noted as taken in (since the table last started over).
    package func knows(_ topic: Topic) -> Bool {
        lastTaken[topic] != nil
    }

    /// Counts a message skipped as a repeat for a reason of the caller's (the broker holds it already).
    package mutating func noteRepeat() {
        repeats += 1
    }

    /// Notes that the message was taken in, when this host's clock read `now`: later ones no newer are repeats. A
    /// time ahead of the clock is noted as the clock's, so a message that claims a lead (within the one allowed)
    /// makes no later real message of its host a repeat.
    package mutating func taken(topic: Topic, host: String, sequence: UInt64, time: UInt64, now: UInt64) {
        guard sequence > 0 else { return }
        if lastTaken.count >= Self.rememberedTopics { lastTaken.removeAll() }
        lastTaken[topic] = (host, sequence, min(time, now))
    }

    /// Forgets every topic's last message (new settings, another cluster).
    package mutating func forgetTaken() {
        lastTaken.removeAll()
    }
}
