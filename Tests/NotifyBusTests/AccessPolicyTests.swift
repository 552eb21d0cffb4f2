import Testing

@testable import NotifyBus

@Suite("Access policy")
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
        #expect(Self.policy.allows(.publish, topic: topic, uid: sample.uid) == sample.publish)
        #expect(Self.policy.allows(.read, topic: topic, uid: sample.uid) == sample.read)
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
        #expect(error.message == "uid 1000 may not publish to or clear \"system.backup\": system topics are published only by root")
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
}
