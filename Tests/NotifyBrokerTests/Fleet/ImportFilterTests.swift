import NIOCore
import Testing

@testable import NotifyBroker
@testable import NotifyProtocol

/// What crosses between hosts, as the daemon decides where the fleet's requests enter: which topics never leave
/// or enter, and which imports are repeats or refused for their time.
@Suite("Topics that cross, as the daemon decides", .timeLimit(.minutes(3)))
struct CrossingTopicsTests {
    @Test("$… and user.… topics stay on their host, whatever the patterns and the access rules say; the rest is exported when nobody may read it")
    func staysLocal() throws {
        #expect(FleetTopics.staysLocal(try Topic("$notifyd.stats")))
        #expect(FleetTopics.staysLocal(try Topic("user.1000.inbox")))
        #expect(!FleetTopics.staysLocal(try Topic("users.list")))
        #expect(!FleetTopics.staysLocal(try Topic("backup.status")))

        // Rules that let nobody (whom exports are read as) read everything: they decide what is readable, never
        // what stays home.
        let resolver = AccessRule.NameResolver(uid: { _ in nil }, gid: { _ in nil })
        let open = AccessPolicy(rules: [
            try AccessRule(parsing: "allow read user.1000.> everyone", name: "open-inbox", resolver: resolver),
            try AccessRule(parsing: "deny read secret.> everyone", name: "secret", resolver: resolver),
        ])
        let nobody = PeerCredentials(pid: 1, uid: 65534, gid: 65534)
        for patterns in [[">"], ["$notifyd.>", "user.>", "backup.>", "secret.>", "users.>"], ["$notifyd.dropped", "user.1000.inbox"]] {
            let exports = FleetTopics(try patterns.map { try TopicPattern($0) })
            for local in ["$notifyd.dropped", "$notifyd.stats", "user.1000.inbox", "user.0.x"] {
                let topic = try Topic(local)
                #expect(exports.exportDecision(for: topic, policy: open, reader: nobody) == .notSelected, "\(local) under \(patterns)")
                #expect(!exports.contains(topic), "\(local) is not taken in under \(patterns) either")
            }
        }
        let all = FleetTopics([try TopicPattern(">")])
        #expect(all.exportDecision(for: try Topic("backup.status"), policy: open, reader: nobody) == .export)
        #expect(all.exportDecision(for: try Topic("users.list"), policy: open, reader: nobody) == .export)
        #expect(all.exportDecision(for: try Topic("secret.key"), policy: open, reader: nobody) == .notReadable)
        let some = FleetTopics([try TopicPattern("backup.>")])
        #expect(some.exportDecision(for: try Topic("other.t"), policy: open, reader: nobody) == .notSelected)
    }
}

/// What the bridge takes in, skips as a repeat, or refuses for its time, before the broker sees it.
@Suite("Import filter", .timeLimit(.minutes(3)))
struct ImportFilterTests {
    let topic = try! Topic("demo.x")
    let now: UInt64 = 1_795_305_600_000_000

    @Test("a time far ahead of this host's clock is refused, so one forged message cannot silence a host; a minute ahead is not")
    func futureTime() {
        var filter = ImportFilter()
        let decision = filter.decide(topic: topic, host: "alpha", sequence: 999, time: now + 3_600_000_000, now: now)
        guard case .refused(let why) = decision else {
            Issue.record("an hour ahead was taken: \(decision)")
            return
        }
        #expect(why.contains("3600 s ahead"), "\(why)")
        #expect(filter.decide(topic: topic, host: "alpha", sequence: 999, time: .max, now: now) != .take)
        #expect(filter.decide(topic: topic, host: "alpha", sequence: 1, time: now + ImportFilter.allowedClockLead, now: now) == .take)
        // The real host's next message is taken, not skipped as a repeat of the forged one.
        #expect(filter.decide(topic: topic, host: "alpha", sequence: 5, time: now, now: now) == .take)
        #expect(filter.repeats == 0)
    }

    @Test("a message taken in with a time ahead of the clock, within the lead allowed, makes no later real message a repeat")
    func leadWithinTheAllowance() {
        var filter = ImportFilter()
        let forged = now + ImportFilter.allowedClockLead - 1
        #expect(filter.decide(topic: topic, host: "alpha", sequence: 1 << 61, time: forged, now: now) == .take)
        filter.taken(topic: topic, host: "alpha", sequence: 1 << 61, time: forged, now: now)
        #expect(filter.decide(topic: topic, host: "alpha", sequence: 8, time: now + 1, now: now + 1) == .take, "not silenced for the minute")
        #expect(filter.decide(topic: topic, host: "alpha", sequence: 8, time: now, now: now + 1) == .repeated, "a true repeat still is")
    }

    @Test("a message no newer by number and time than the last taken from its host is a repeat, and counted")
    func repeats() {
        var filter = ImportFilter()
        filter.taken(topic: topic, host: "alpha", sequence: 5, time: now, now: now)
        #expect(filter.decide(topic: topic, host: "alpha", sequence: 5, time: now, now: now) == .repeated)
        #expect(filter.decide(topic: topic, host: "alpha", sequence: 4, time: now - 1, now: now) == .repeated)
        #expect(filter.decide(topic: topic, host: "alpha", sequence: 1, time: now + 1, now: now) == .take, "renumbered after a wipe, but later")
        #expect(filter.decide(topic: topic, host: "beta", sequence: 5, time: now, now: now) == .take)
        #expect(filter.repeats == 2)
        filter.noteRepeat()
        #expect(filter.repeats == 3)
        filter.forgetTaken()
        #expect(filter.decide(topic: topic, host: "alpha", sequence: 5, time: now, now: now) == .take)
    }
}
