import Testing

@testable import NotifyBroker
@testable import NotifyProtocol

/// Which sessions a topic's messages go to, without a broker: the lists made from the index, kept by generation,
/// and bounded together.
@Suite("Subscriber routing", .timeLimit(.minutes(1)))
struct SubscriberRoutingTests {
    static func session(_ id: UInt64, uid: UInt32 = 1000) -> Session {
        Session(id: id, peer: PeerCredentials(pid: 1, uid: uid, gid: uid), account: UserAccount(uid: uid), transport: DiscardingTransport())
    }

    /// Subscribes `session` to `pattern` and says so, as the broker does.
    static func subscribe(_ session: Session, _ pattern: String, _ overflow: OverflowPolicy, in routing: inout SubscriberRouting, topics: TopicTable) throws -> Subscription {
        let subscription = Subscription(session: session, pattern: try TopicPattern(pattern), overflow: overflow)
        routing.insert(subscription)
        routing.patternChanged(subscription.pattern, in: topics)
        return subscription
    }

    static func state(_ name: String, in topics: inout TopicTable) throws -> TopicState {
        let state = TopicState(topic: try Topic(name))
        topics.restore(state)
        return state
    }

    @Test("a session matched by several patterns is in the list once, with its strictest policy; the list is kept until a change")
    func onceStrictest() throws {
        var topics = TopicTable(maxTopics: 10)
        var routing = SubscriberRouting()
        let state = try Self.state("a.b", in: &topics)
        let one = Self.session(1), two = Self.session(2)
        _ = try Self.subscribe(one, "a.b", .latestOnly, in: &routing, topics: topics)
        _ = try Self.subscribe(one, "a.*", .disconnect, in: &routing, topics: topics)
        _ = try Self.subscribe(two, "a.>", .dropOldest, in: &routing, topics: topics)
        #expect(!routing.isCurrent(state))
        let made = routing.makeList(of: state, policy: .default, bound: 100, topics: topics)
        #expect(made.list.map(\.session.id).sorted() == [1, 2])
        #expect(made.list.first { $0.session === one }?.overflow == .disconnect)
        #expect(routing.isCurrent(state) && routing.cachedEntries == 2)

        // A literal change drops that topic's list only; a wildcard change makes every list stale.
        let literal = try Self.subscribe(two, "a.b", .dropOldest, in: &routing, topics: topics)
        #expect(!routing.isCurrent(state) && routing.cachedEntries == 0)
        _ = routing.makeList(of: state, policy: .default, bound: 100, topics: topics)
        routing.remove(literal)
        routing.patternChanged(try TopicPattern("a.*"), in: topics)
        #expect(!routing.isCurrent(state) && routing.cachedEntries == 2, "stale, and still counted until let go")
        routing.releaseStaleLists(in: topics)
        #expect(routing.cachedEntries == 0 && state.subscribers.isEmpty)
        withExtendedLifetime([one, two]) {}  // subscriptions hold their sessions unowned, as a broker's do
    }

    @Test("a wildcard delivers no topic its connection may not read")
    func policy() throws {
        var topics = TopicTable(maxTopics: 10)
        var routing = SubscriberRouting()
        let secret = try Self.state("secret.key", in: &topics)
        let reader = Self.session(1, uid: 1000)
        _ = try Self.subscribe(reader, ">", .dropOldest, in: &routing, topics: topics)
        let resolver = AccessRule.NameResolver(uid: { _ in nil }, gid: { _ in nil })
        let policy = AccessPolicy(rules: [try AccessRule(parsing: "deny read secret.> everyone", name: "secret", resolver: resolver)])
        #expect(routing.makeList(of: secret, policy: policy, bound: 100, topics: topics).list.isEmpty)
        routing.everyListChanged()
        #expect(routing.makeList(of: secret, policy: .default, bound: 100, topics: topics).list.count == 1)
        withExtendedLifetime(reader) {}
    }

    @Test("past the bound, stale lists go first, then every other; the one just made stays")
    func bound() throws {
        var topics = TopicTable(maxTopics: 10)
        var routing = SubscriberRouting()
        let states = try (0..<3).map { try Self.state("t.\($0)", in: &topics) }
        let sessions = [Self.session(1), Self.session(2)]
        for session in sessions { _ = try Self.subscribe(session, "t.*", .dropOldest, in: &routing, topics: topics) }
        for state in states.prefix(2) { _ = routing.makeList(of: state, policy: .default, bound: 5, topics: topics) }
        #expect(routing.cachedEntries == 4)
        let made = routing.makeList(of: states[2], policy: .default, bound: 5, topics: topics)
        #expect(made.list.count == 2)
        #expect(routing.cachedEntries == 2 && states[0].subscribers.isEmpty && states[2].subscribers.count == 2)
        withExtendedLifetime(sessions) {}
    }
}
