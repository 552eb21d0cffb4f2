public import NIOCore

/// One request from a client, as read from or written to the wire.
public struct Request: Sendable, Hashable {
    /// The id that every reply to this request echoes, if the client gave one.
    public var id: UInt64?
    /// What the client asks for.
    public var command: Command

    /// Creates a request.
    public init(id: UInt64? = nil, _ command: Command) {
        self.id = id
        self.command = command
    }
}

/// What a client can ask the daemon to do (see PROTOCOL.md, "Requests").
public enum Command: Sendable, Hashable {
    /// Publish `payload` to `topic`.
    case publish(Topic, payload: ByteBuffer, PublishOptions)
    /// Subscribe the connection to a pattern.
    case subscribe(TopicPattern, SubscribeOptions)
    /// Remove the connection's subscription with exactly this pattern.
    case unsubscribe(TopicPattern)
    /// Read a topic's buffered message without subscribing.
    case latest(Topic)
    /// Forget a topic's buffered message without sending anything.
    case clear(Topic)
    /// Read the last `count` messages (all for nil) of a topic's history, oldest first (protocol 3).
    case history(Topic, count: Int?)
    /// List the known topics, all or those matching a pattern, in name order: at most ``Command/topicsPageSize``,
    /// starting after `after` when given (protocol 2), so that no reply is larger than a page.
    case topics(TopicPattern?, after: Topic? = nil)
    /// Read the daemon's counters.
    case stats
    /// Ask which access rule decides publishing to and reading `topic`, for the connection's peer or (root only)
    /// for another uid.
    case explain(Topic, uid: UInt32?)
    /// Ask for a `PONG`; since replies keep request order, it also confirms every earlier request was handled.
    case ping
    /// Whether the connection receives its own publishes (true by default).
    case setEcho(Bool)
    /// Whether the daemon holds this connection's deliveries back (`OPT pause`, `OPT resume`; protocol 2): while it
    /// does, deliveries wait in the daemon's bounded queue under their overflow policy and replies still go out.
    /// This is how a client whose consumer fell behind keeps reading its replies without buffering deliveries.
    case setDeliveriesPaused(Bool)
    /// Follow this host's own publishes and clears of topics matching the patterns, which user `nobody` may read, as
    /// `EXP` frames (protocol 5): the fleet service's way out. Only the daemon's fleet user may ask.
    case follow([TopicPattern])
    /// Publish another host's message here, or clear as it cleared (protocol 5): the fleet service's way in. Only the
    /// daemon's fleet user may ask; the daemon checks every claim in it.
    ///
    /// Boxed (`indirect`), as ``fleetStats(_:)`` is: unboxed, a message with its provenance made every request and
    /// every frame the daemon decodes, a `PUB` among them, twice its size (a `Request` 113 bytes, not 58), and the
    /// daemon's 1 → 1 throughput 0.7 of what it was (issue 51).
    indirect case importMessage(FleetImport)
    /// Tell this host's subscribers that `count` messages of other hosts were lost before the fleet service could
    /// take them in (protocol 5; the fleet user only).
    case announceMissed(UInt64)
    /// The fleet service's own counters, which `STATS` shows after the daemon's (protocol 5; the fleet user only).
    indirect case fleetStats(ServerStats)
}

extension Command {
    package var isPublish: Bool {
        switch self {
        case .publish, .importMessage: true
        default: false
        }
    }
}

/// How a message is published.
public struct PublishOptions: Sendable, Hashable {
    /// Whether the message becomes the topic's buffered latest message (true unless `noretain`).
    public var retain: Bool
    /// Whether the server confirms the publish with `OK <seq>`.
    public var acknowledge: Bool

    /// Creates publish options; the default retains and asks for no acknowledgement, as on the wire.
    public init(retain: Bool = true, acknowledge: Bool = false) {
        self.retain = retain
        self.acknowledge = acknowledge
    }
}

/// How a subscription starts, and what happens when its subscriber falls behind.
public struct SubscribeOptions: Sendable, Hashable {
    /// Whether the buffered message of each matching topic is delivered before live ones.
    public var latestFirst: Bool
    /// Where the subscription resumes (protocol 3): the messages of each matching topic's history after this point
    /// are delivered before live ones, with a `DROP` notice first for what the history no longer holds.
    public var since: ResumePoint?
    /// What the daemon does when this subscriber's queue is full.
    public var overflow: OverflowPolicy

    /// Creates subscribe options; by default only live messages are delivered, and the oldest queued messages are
    /// dropped (and announced) when the subscriber falls behind.
    public init(latestFirst: Bool = false, since: ResumePoint? = nil, overflow: OverflowPolicy = .dropOldest) {
        self.latestFirst = latestFirst
        self.since = since
        self.overflow = overflow
    }
}

/// Where a subscription resumes: after a sequence number of one topic, or after a time.
public enum ResumePoint: Sendable, Hashable {
    /// After this sequence number of the topic the subscription names exactly.
    case sequence(UInt64)
    /// After this time, for every topic the pattern matches.
    case time(PublishTime)
}

extension Command {
    /// The most topics one `TOPICS` reply lists; a reply of exactly this many may have more after it.
    public static let topicsPageSize = 10_000

    /// The most bytes of messages one `HISTORY` reply holds (more when one message alone is larger): the newest that
    /// fit, so that no reply is larger than this however much history a topic keeps.
    public static let historyReplyBytes = 4 << 20

    /// Where the next page of a `TOPICS` listing starts, after `page` from a server of protocol `version`; nil when
    /// `page` was the last (a protocol 1 server never pages: it answers all at once).
    package static func topicsPage(after page: [TopicInfo], serverVersion version: UInt64) -> Topic? {
        guard page.count == topicsPageSize, version >= 2 else { return nil }
        return page.last?.topic
    }
}
