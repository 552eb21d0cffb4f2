import Testing

@testable import NotifyBus
@testable import NotifyBroker
@testable import NotifyProtocol

@Suite("Access policy", .timeLimit(.minutes(3)))
struct AccessPolicyTests {
    static let policy = AccessPolicy.default

    struct Case: Sendable, CustomTestStringConvertible {
        let topic: String
        let uid: UInt32
        let publish: Bool
        let read: Bool
        var testDescription: String { "uid \(uid) on \(topic)" }
    }

    @Test(
        "the default rules: $ by the daemon only, user.<uid> private, system published by root, the rest open",
        arguments: [
            Case(topic: "$notifyd.x", uid: 0, publish: false, read: true),
            Case(topic: "$notifyd.x", uid: 1000, publish: false, read: true),
            Case(topic: "user.1000", uid: 1000, publish: true, read: true),
            Case(topic: "user.1000.mail.new", uid: 1000, publish: true, read: true),
            Case(topic: "user.1000.mail.new", uid: 1001, publish: false, read: false),
            Case(topic: "user.1000.mail.new", uid: 0, publish: true, read: true),
            Case(topic: "user.10000.x", uid: 1000, publish: false, read: false),
            Case(topic: "user.alice.x", uid: 1001, publish: true, read: true),
            Case(topic: "user.99999999999.x", uid: 1001, publish: true, read: true),
            Case(topic: "system.backup.done", uid: 0, publish: true, read: true),
            Case(topic: "system.backup.done", uid: 1000, publish: false, read: true),
            Case(topic: "system", uid: 1000, publish: false, read: true),
            Case(topic: "systemd.x", uid: 1000, publish: true, read: true),
            Case(topic: "backup.status", uid: 65534, publish: true, read: true),
        ]
    )
    func rules(_ sample: Case) throws {
        let topic = try Topic(sample.topic)
        let peer = PeerCredentials(pid: 1, uid: sample.uid, gid: sample.uid)
        #expect(Self.policy.allows(.publish, topic: topic, peer: peer) == sample.publish)
        #expect(Self.policy.allows(.read, topic: topic, peer: peer) == sample.read)
    }

    @Test("a denied publish is not-permitted with the rule, and nothing is delivered or buffered")
    func deniedPublish() throws {
        let harness = BrokerHarness()
        let reader = harness.connect(uid: 1000)
        reader.send("SUB system.>\nSUB user.>\n")
        _ = try reader.received()
        let user = harness.connect(uid: 1000)
        user.send("#1 PUB system.backup 1\nx\n#2 CLEAR system.backup\n#3 PUB user.1001.x 1\ny\n")
        let refusals = try user.received()
        #expect(refusals.map(errorCode) == [.notPermitted, .notPermitted, .notPermitted])
        guard case .error(let error) = refusals[0] else { return }
        #expect(error.message == "uid 1000 may not publish to or clear \"system.backup\": system topics are published only by root; EXPLAIN system.backup (notify explain) shows who may")
        #expect(try reader.deliveries() == [])
        let root = harness.connect(uid: 0)
        root.send("PUB system.backup 4\ndone\n#4 LATEST system.backup\n")
        #expect(try root.received().count == 1, "root publishes, and reads it back")
        #expect(try reader.deliveries() == ["done"], "everyone reads system topics")
        #expect(harness.broker.statistics.retainedTopics == 1)
    }

    @Test("user.<uid> topics: others may not read them by name, and a wildcard of theirs never delivers them")
    func privateTopics() throws {
        let harness = BrokerHarness()
        let owner = harness.connect(uid: 1000)
        let other = harness.connect(uid: 1001)
        other.send("#1 SUB user.1000.mail\n#2 SUB user.>\n#3 SUB >\n")
        let replies = try other.received()
        #expect(replies.map(errorCode) == [.notPermitted, nil, nil], "\(replies)")
        owner.send("PUB user.1000.mail 3\nnew\nPUB user.1001.todo 1\nx\n")
        #expect(try owner.received().map(errorCode) == [.notPermitted], "the owner may not write another's topics either")
        #expect(try other.deliveries() == [], "nothing of uid 1000's reached uid 1001")
        other.send("#4 LATEST user.1000.mail\n#5 SUB user.> latest\n#6 TOPICS\n")
        let answers = try other.received()
        #expect(errorCode(answers[0]) == .notPermitted)
        #expect(answers[1] == .ok(requestID: 5, value: nil), "no buffered message of uid 1000 came first: \(answers)")
        guard case .topics(_, let infos) = answers[2] else { Issue.record("no TOPICS: \(answers)"); return }
        #expect(infos.isEmpty, "TOPICS does not show topics the caller may not read")
        let root = harness.connect(uid: 0)
        root.send("SUB user.1000.mail\n#7 LATEST user.1000.mail\n")
        #expect(try root.received().count == 2, "root reads every user's topics")
    }

    static let resolver = AccessRule.NameResolver(
        uid: { $0 == "alice" ? 1000 : nil },
        gid: { $0 == "backup" ? 34 : nil }
    )

    static func rule(_ text: String, _ name: String = "r") throws -> AccessRule {
        try AccessRule(parsing: text, name: name, resolver: resolver)
    }

    @Test("a rule reads as allow|deny publish|read|all PATTERN WHO..., with names resolved to numbers")
    func parsing() throws {
        let rule = try Self.rule("allow  all backup.>\tuser:alice group:backup user:7 group:8 unit:backup.service everyone")
        #expect(rule.effect == .allow && rule.accesses == [.publish, .read] && rule.pattern.text == "backup.>")
        #expect(rule.principals == [.user(1000), .group(34), .user(7), .group(8), .unit("backup.service"), .everyone])
        #expect(rule.text == "allow all backup.> user:1000 group:34 user:7 group:8 unit:backup.service everyone")
    }

    @Test(
        "a rule that cannot be read says why",
        arguments: [
            ("allow publish x", "a rule is `allow|deny publish|read|all PATTERN WHO...`"),
            ("permit publish x everyone", "a rule starts with allow or deny, not \"permit\""),
            ("allow write x everyone", "after allow comes publish, read or all, not \"write\""),
            ("allow read a..b everyone", "\"a..b\" is not a topic pattern"),
            ("allow read x user:bob", "there is no user \"bob\""),
            ("allow read x group:staff", "there is no group \"staff\""),
            ("allow read x alice", "\"alice\" is not a WHO"),
            ("allow read x host:a", "\"host:a\" is not a WHO"),
        ]
    )
    func badRules(_ text: String, _ problem: String) {
        let error = #expect(throws: AccessRuleError.self) { try Self.rule(text) }
        #expect(error?.description.contains(problem) == true, "\(String(describing: error))")
    }

    @Test("rules are tried in order before the built-in ones; the first that applies decides; groups include supplementary ones")
    func order() throws {
        let policy = AccessPolicy(rules: [
            try Self.rule("allow publish system.backup.> group:backup", "writers"),
            try Self.rule("deny all secret.> everyone", "closed"),
            try Self.rule("allow read secret.> unit:vault.service", "never-reached"),
            try Self.rule("allow read user.1000.> user:1001", "share"),
        ])
        func peer(_ uid: UInt32, gid: UInt32? = nil, groups: [UInt32] = [], unit: String? = nil) -> PeerCredentials {
            PeerCredentials(pid: 1, uid: uid, gid: gid ?? uid, groups: groups, unit: unit)
        }
        let backup = try Topic("system.backup.done")
        #expect(policy.allows(.publish, topic: backup, peer: peer(1001, groups: [5, 34])), "a supplementary group")
        #expect(policy.allows(.publish, topic: backup, peer: peer(1001, gid: 34)), "the primary group")
        let refused = policy.decide(.publish, topic: backup, peer: peer(1001, groups: [5]))
        #expect(!refused.isAllowed && refused.rule == .systemPublishedByRoot, "no rule applies: the built-in one decides")
        let secret = try Topic("secret.keys")
        let closed = policy.decide(.read, topic: secret, peer: peer(0, unit: "vault.service"))
        #expect(!closed.isAllowed && closed.rule.description == "rule closed: deny all secret.> everyone", "first match wins, even for root")
        #expect(policy.allows(.read, topic: try Topic("user.1000.inbox"), peer: peer(1001)), "a rule opens a built-in private topic")
        #expect(!policy.allows(.publish, topic: try Topic("user.1000.inbox"), peer: peer(1001)), "for what it names only")
    }

    @Test("no rule lets a client publish to a $ topic; reading one is up to the rules")
    func reservedStaysReserved() throws {
        let policy = AccessPolicy(rules: [
            try Self.rule("allow all $notifyd.> everyone", "opens-too-much"),
            try Self.rule("deny read $secret.> everyone", "closes-reading"),
        ])
        let root = PeerCredentials(pid: 1, uid: 0, gid: 0, groups: [], unit: nil)
        let publish = policy.decide(.publish, topic: try Topic("$notifyd.status"), peer: root)
        #expect(!publish.isAllowed && publish.rule == .reservedForDaemon, "not even root, not even by a rule")
        #expect(policy.decide(.read, topic: try Topic("$notifyd.status"), peer: root).rule.description.contains("opens-too-much"))
        #expect(!policy.allows(.read, topic: try Topic("$secret.x"), peer: root))
        #expect(policy.allows(.read, topic: try Topic("$other"), peer: root), "the built-in rule: readable by everyone")
    }

    @Test("EXPLAIN answers for the caller, or for root about another uid (with its groups); others may not ask about others")
    func explain() throws {
        var configuration = BrokerConfiguration.default
        configuration.accessPolicy = AccessPolicy(rules: [try Self.rule("allow publish system.backup.> group:34", "writers")])
        let harness = BrokerHarness(configuration: configuration)
        harness.broker.groupsOfUser = { $0 == 1002 ? (gid: 100, groups: [100, 34]) : nil }
        let user = harness.connect(uid: 1001)
        user.send("#1 EXPLAIN system.backup.done\n#2 EXPLAIN system.backup.done 1002\n")
        let replies = try user.received()
        #expect(
            replies.first == .explanation(
                requestID: 1,
                AccessExplanation(uid: 1001, decisions: [
                    .init(access: "publish", isAllowed: false, rule: "system topics are published only by root"),
                    .init(access: "read", isAllowed: true, rule: "system topics are readable by everyone"),
                ])
            )
        )
        #expect(replies.dropFirst().first.flatMap(errorCode) == .notPermitted)
        let root = harness.connect(uid: 0)
        root.send("#3 EXPLAIN system.backup.done 1002\n")
        guard case .explanation(_, let other) = try root.received().first else { Issue.record("no EXPLAIN reply"); return }
        #expect(other.uid == 1002 && other.decisions.first?.isAllowed == true)
        #expect(other.decisions.first?.rule == "rule writers: allow publish system.backup.> group:34")
    }

    @Test("a new policy decides deliveries to subscriptions already made, from the next publish")
    func reconfigure() throws {
        let harness = BrokerHarness()
        let reader = harness.connect(uid: 1001)
        reader.send("SUB team.>\n")
        _ = try reader.received()
        let publisher = harness.connect(uid: 1000)
        publisher.send("PUB team.news 1\na\n")
        #expect(try reader.deliveries() == ["a"])
        var configuration = harness.broker.configuration
        configuration.accessPolicy = AccessPolicy(rules: [try Self.rule("deny read team.> user:1001")])
        harness.broker.reconfigure(configuration)
        publisher.send("PUB team.news 1\nb\n")
        #expect(try reader.deliveries() == [], "the cached list of subscribers was filtered again")
        configuration.accessPolicy = .default
        harness.broker.reconfigure(configuration)
        publisher.send("PUB team.news 1\nc\n")
        #expect(try reader.deliveries() == ["c"])
    }
}

extension AccessPolicyTests {
    @Test("a connection publishing to one topic again and again is refused from the first publish after a reload denies it")
    func reloadDeniesARunOfPublishes() throws {
        let harness = BrokerHarness()
        let publisher = harness.connect(uid: 1000)
        publisher.send("#1 PUB team.news 1 ack\na\n#2 PUB team.news 1 ack\nb\n")
        #expect(try publisher.received() == [.ok(requestID: 1, value: 1), .ok(requestID: 2, value: 2)])
        var configuration = harness.broker.configuration
        configuration.accessPolicy = AccessPolicy(rules: [try Self.rule("deny publish team.> user:1000")])
        harness.broker.reconfigure(configuration)
        publisher.send("#3 PUB team.news 1 ack\nc\n")
        #expect(try publisher.received().map(errorCode) == [.notPermitted], "the decision cached for the run is not used")
        configuration.accessPolicy = .default
        harness.broker.reconfigure(configuration)
        publisher.send("#4 PUB team.news 1 ack\nd\n")
        #expect(try publisher.received() == [.ok(requestID: 4, value: 3)])
    }
}

/// Issue 14, "Identity": a peer whose groups the daemon could not read is never let through by a rule by group,
/// nor let past a `deny` by group.
@Suite("Access policy with unknown groups", .timeLimit(.minutes(3)))
struct UnknownGroupsTests {
    @Test("rules by group fail closed for a peer whose groups are not known: a deny applies, an allow does not")
    func failClosed() throws {
        let rules = try ["deny read secret.> group:70", "allow publish system.> group:70"].enumerated().map { index, text in
            try AccessRule(parsing: text, name: "r\(index)", line: index + 1, resolver: AccessRule.NameResolver(uid: { _ in nil }, gid: { _ in nil }))
        }
        let policy = AccessPolicy(rules: rules)
        let unknown = PeerCredentials(pid: 1, uid: 1000, gid: 1000, groups: [], groupsAreKnown: false)
        let outsider = PeerCredentials(pid: 1, uid: 1000, gid: 1000, groups: [71])
        #expect(!policy.allows(.read, topic: try Topic("secret.plans"), peer: unknown), "as if in the denied group")
        #expect(policy.allows(.read, topic: try Topic("secret.plans"), peer: outsider))
        #expect(!policy.allows(.publish, topic: try Topic("system.x"), peer: unknown), "not as if in the allowed group")
    }
}

/// Issue 14, "Leaks across users": after a reload, nothing is sent of a topic the new policy denies, queued or not.
@Suite("Access policy reloads and queued deliveries", .timeLimit(.minutes(3)))
struct PolicyReloadQueueTests {
    @Test("deliveries and drop notices queued for a topic the new policy denies are taken out; the others stay")
    func queuedAfterReload() throws {
        var configuration = BrokerConfiguration.default
        configuration.maxQueuedMessages = 3
        let harness = BrokerHarness(configuration: configuration)
        let subscriber = harness.connect(uid: 1000)
        subscriber.send("SUB >\n")
        _ = try subscriber.received()
        subscriber.transport.isWritable = false
        harness.connect(uid: 2000).send("PUB secret.a 1\n1\nPUB open.b 1\n2\nPUB secret.a 1\n3\nPUB secret.a 1\n4\nPUB open.b 1\n5\n")

        let rule = try AccessRule(
            parsing: "deny read secret.> user:1000",
            name: "no-secrets",
            line: 1,
            resolver: AccessRule.NameResolver(uid: { _ in nil }, gid: { _ in nil })
        )
        var reloaded = harness.broker.configuration
        reloaded.accessPolicy = AccessPolicy(rules: [rule])
        harness.broker.reconfigure(reloaded)
        OutboundQueueTests.resume(subscriber)
        let frames = try subscriber.received()
        #expect(OutboundQueueTests.summary(frames) == ["DROP open.b 1 1-1", "open.b#2"], "\(OutboundQueueTests.summary(frames))")
    }
}
