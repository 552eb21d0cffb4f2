import NIOCore
import Testing
#if canImport(Glibc)
import Glibc
#endif
import TestSupport

@testable import NotifyBus
@testable import NotifyBroker
@testable import NotifyProtocol

/// `SUB … since=`: the history after a sequence number or a time, then live messages, and a `DROP` notice first for
/// what the history no longer holds (broker, no socket).
@Suite("Resuming a subscription from history (broker, no socket)", .timeLimit(.minutes(3)))
struct ResumeTests {
    /// What a resuming subscriber received, in a form easy to compare: `LAST <seq>`, `MSG <seq>`,
    /// `DROP <count> <first>-<last>`, `OK`.
    static func summary(_ frames: [ServerFrame]) -> [String] {
        frames.compactMap { frame in
            switch frame {
            case .latest(let id, let delivery): return "LAST#\(id ?? 0) \(delivery.topic.name) \(delivery.sequence)"
            case .delivery(let delivery): return "MSG \(delivery.topic.name) \(delivery.sequence)"
            case .dropped(let notice): return "DROP \(notice.topic.name) \(notice.count) \(notice.firstSequence)-\(notice.lastSequence)"
            case .missed(let id, let notice):
                return "DROP#\(id) \(notice.topic.name) \(notice.count) \(notice.firstSequence)-\(notice.lastSequence)"
            case .ok(let id, _): return "OK#\(id ?? 0)"
            case .error(let error): return "ERR \(error.code)"
            default: return nil
            }
        }
    }

    /// The default configuration, with history (as by default: spelled out for the tests that rely on it).
    static var withHistory: BrokerConfiguration {
        var configuration = BrokerConfiguration.default
        configuration.history = .resumable
        return configuration
    }

    static func publish(_ count: Int, to topic: String, from client: BrokerHarness.Client) {
        client.send(String(repeating: "PUB \(topic) 1 noretain\nx\n", count: count))
    }

    @Test("after a sequence number: what came after it, then live messages, without a gap or a repeat")
    func afterSequence() throws {
        let harness = BrokerHarness(configuration: Self.withHistory)
        let publisher = harness.connect()
        Self.publish(10, to: "t", from: publisher)
        let subscriber = harness.connect()
        subscriber.send("#7 SUB t since=4\n")
        Self.publish(1, to: "t", from: publisher)
        #expect(Self.summary(try subscriber.received()) == (5...10).map { "LAST#7 t \($0)" } + ["OK#7", "MSG t 11"])
        subscriber.send("#8 SUB u since=0\n#9 SUB t since=11\n")
        #expect(Self.summary(try subscriber.received()) == ["OK#8", "OK#9"], "nothing after it: nothing to replay")
    }

    @Test("what the history no longer holds is announced with DROP before the replay")
    func gapAnnounced() throws {
        var configuration = BrokerConfiguration.default
        configuration.history = HistoryLimits(messages: 5, bytes: 1 << 20)
        configuration.historyRules = [HistoryRule(try TopicPattern("none"), .off)]
        let harness = BrokerHarness(configuration: configuration)
        let publisher = harness.connect()
        Self.publish(20, to: "t", from: publisher)
        Self.publish(3, to: "none", from: publisher)
        let subscriber = harness.connect()
        subscriber.send("#1 SUB t since=3\n#2 SUB none since=1\n")
        let frames = try subscriber.received()
        #expect(Self.summary(frames) == ["DROP#1 t 12 4-15"] + (16...20).map { "LAST#1 t \($0)" } + ["OK#1", "DROP#2 none 2 2-3", "OK#2"])
        let reasons = frames.compactMap { frame -> DropReason? in if case .missed(_, let notice) = frame { notice.reason } else { nil } }
        #expect(reasons == [.history, .history], "each says which bound dropped: the history, not the subscriber's queue")
    }

    @Test("after a time: each matching topic's messages after it; a topic that lost history after it says so")
    func afterTime() throws {
        var configuration = BrokerConfiguration.default
        configuration.history = HistoryLimits(messages: 3, bytes: 1 << 20)
        let harness = BrokerHarness(configuration: configuration)
        let publisher = harness.connect()
        Self.publish(2, to: "a.kept", from: publisher)
        let since = PublishTime(microsecondsSinceEpoch: harness.now)
        Self.publish(2, to: "a.kept", from: publisher)
        Self.publish(5, to: "a.lost", from: publisher)
        Self.publish(1, to: "b.other", from: publisher)
        let subscriber = harness.connect()
        subscriber.send("#3 SUB a.* since=\(since.rfc3339)\n")
        let summary = Self.summary(try subscriber.received())
        #expect(summary.filter { $0.contains("a.kept") } == ["LAST#3 a.kept 3", "LAST#3 a.kept 4"])
        #expect(summary.filter { $0.contains("a.lost") } == ["DROP#3 a.lost 2 1-2", "LAST#3 a.lost 3", "LAST#3 a.lost 4", "LAST#3 a.lost 5"])
        #expect(!summary.contains { $0.contains("b.other") })
        #expect(summary.last == "OK#3")
    }

    @Test("HISTORY answers the last messages of a topic's history, oldest first, then OK with their number")
    func historyRequest() throws {
        let harness = BrokerHarness(configuration: Self.withHistory)
        let client = harness.connect(uid: 1000)
        Self.publish(10, to: "t", from: client)
        client.send("#1 HISTORY t 3\n#2 HISTORY t\n#3 HISTORY nothing.here\n#4 HISTORY t 0\n")
        let frames = try client.received()
        #expect(Self.summary(frames) == (8...10).map { "LAST#1 t \($0)" } + ["OK#1"] + (1...10).map { "LAST#2 t \($0)" } + ["OK#2", "OK#3", "OK#4"])
        #expect(frames.contains(.ok(requestID: 1, value: 3)) && frames.contains(.ok(requestID: 3, value: 0)))
        let other = harness.connect(uid: 2000)
        client.send("PUB user.1000.private 1\nx\n")
        other.send("#5 HISTORY user.1000.private\n#6 HISTORY t 1 2\n")
        #expect(Self.summary(try other.received()) == ["ERR not-permitted", "ERR malformed"])
    }

    @Test("in one batch: a burst, a message too large for the history in it, then HISTORY and SUB since= see it all")
    func burstThenReadInOneBatch() throws {
        var configuration = BrokerConfiguration.default
        configuration.history = HistoryLimits(messages: 4, bytes: 1_000)
        let harness = BrokerHarness(configuration: configuration)
        let client = harness.connect()
        let big = String(repeating: "b", count: 2_000)
        let small = (1...5).map { _ in "PUB t 1 noretain\nx\n" }.joined()
        let more = (1...6).map { _ in "PUB t 1 noretain\nx\n" }.joined()
        client.send(small + "PUB t 2000 noretain\n\(big)\n" + more + "#1 HISTORY t\n#2 SUB t since=0\n" + "PUB t 1 noretain\nx\n")
        #expect(
            Self.summary(try client.received())
                == (9...12).map { "LAST#1 t \($0)" } + ["OK#1", "DROP#2 t 8 1-8"] + (9...12).map { "LAST#2 t \($0)" } + ["OK#2", "MSG t 13"],
            "the history holds the last 4 after the large one, which ended its run; the 8 before are announced"
        )
        #expect(harness.broker.statistics.historyMessages == 4)
    }

    @Test("a HISTORY reply holds the newest messages that fit in 4 MiB: replies are never dropped, so they stay small")
    func historyReplyBounded() throws {
        var configuration = Self.withHistory
        configuration.history = HistoryLimits(messages: 100, bytes: 16 << 20)
        let harness = BrokerHarness(configuration: configuration)
        let client = harness.connect()
        let payload = String(repeating: "x", count: 512 << 10)
        client.send(String(repeating: "PUB big \(payload.utf8.count) noretain\n\(payload)\n", count: 20))
        client.send("#1 HISTORY big\n")
        let frames = try client.received()
        #expect(Self.summary(frames) == (14...20).map { "LAST#1 big \($0)" } + ["OK#1"])
        #expect(frames.last == .ok(requestID: 1, value: 7))
    }

    @Test("a topic whose history began after its first messages announces those as not held")
    func historyTurnedOnLater() throws {
        var configuration = BrokerConfiguration.default
        configuration.history = .off
        let harness = BrokerHarness(configuration: configuration)
        let client = harness.connect()
        Self.publish(5, to: "t", from: client)
        configuration.history = .resumable
        harness.broker.reconfigure(configuration)
        Self.publish(2, to: "t", from: client)
        client.send("#1 SUB t since=1970-01-01T00:00:00Z\n#2 SUB t since=0\n")
        #expect(Self.summary(try client.received()) == [
            "DROP#1 t 5 1-5", "LAST#1 t 6", "LAST#1 t 7", "OK#1", "DROP#2 t 5 1-5", "LAST#2 t 6", "LAST#2 t 7", "OK#2",
        ])
    }

    @Test("since= a number past the topic's (numbered again from 1 since): everything it has is replayed, nothing skipped")
    func sequencePastRenumberedTopic() throws {
        let harness = BrokerHarness(configuration: Self.withHistory)
        let client = harness.connect()
        Self.publish(3, to: "t", from: client)
        client.send("#1 SUB t since=500\n")
        #expect(Self.summary(try client.received()) == ["LAST#1 t 1", "LAST#1 t 2", "LAST#1 t 3", "OK#1"])
    }

    @Test("a clock set back stamps no message earlier than the last, not even after a restart: a resume by time skips none")
    func clockSetBack() throws {
        let directory = StateLogTests.Directory()
        let stamped: PublishTime
        do {
            let first = try HistoryPersistenceTests.start(in: directory)
            let publisher = first.connect()
            Self.publish(1, to: "t", from: publisher)
            stamped = first.broker.topicTable["t"]!.lastPublished!
            first.now -= 60_000_000  // an NTP step back of a minute
            publisher.send("PUB u 1 noretain\nx\n")
            #expect(first.broker.topicTable["u"]!.lastPublished! >= stamped)
            try first.broker.saveState()
        }
        let second = try HistoryPersistenceTests.start(in: directory)
        second.now = stamped.microsecondsSinceEpoch - 120_000_000
        let client = second.connect()
        client.send("#1 SUB t since=\(stamped.rfc3339)\n")
        Self.publish(1, to: "t", from: second.connect())
        #expect(Self.summary(try client.received()) == ["OK#1", "MSG t 2"], "the message after the point is delivered")
        // As a ResumingSubscription asks: after the last time it saw, less a microsecond.
        client.send("#2 SUB t since=\(PublishTime(microsecondsSinceEpoch: stamped.microsecondsSinceEpoch - 1).rfc3339)\n")
        #expect(Self.summary(try client.received()) == ["LAST#2 t 1", "LAST#2 t 2", "OK#2"], "stamped no earlier than the point")
    }

    @Test("since= is checked: a sequence number only for a name, not with latest, a time in RFC 3339 form")
    func grammar() throws {
        let harness = BrokerHarness(configuration: Self.withHistory)
        let client = harness.connect()
        client.send("#1 SUB a.* since=5\n#2 SUB a latest since=5\n#3 SUB a since=yesterday\n#4 SUB a since=2026-11-25T09:30:00+01:00\n")
        #expect(Self.summary(try client.received()) == ["ERR malformed", "ERR malformed", "ERR malformed", "OK#4"])
        for options in [SubscribeOptions(since: .sequence(42)), SubscribeOptions(since: .time(PublishTime(microsecondsSinceEpoch: 1_795_305_600_123_456)))] {
            var wire = ByteBuffer()
            wire.writeRequest(Request(id: 1, .subscribe(try TopicPattern("a"), options)))
            var decoder = RequestDecoder(limits: .default)
            guard case .request(let request)? = decoder.decode(buffer: &wire) else {
                Issue.record("no request from \(String(buffer: wire))")
                continue
            }
            #expect(request == Request(id: 1, .subscribe(try TopicPattern("a"), options)))
        }
    }

    @Test("RFC 3339 times written as the C library's calendar says, from 1970 to past the year 9999")
    func rfc3339Writing() {
        var random = SeededRandom(seed: SeededRandom.seed(default: 3_339))
        let yearTenThousand: UInt64 = 253_402_300_800  // 10000-01-01T00:00:00Z
        let samples: [UInt64] = [0, 1, 59_999_999, 951_782_400_000_000, 1_709_164_800_123_456, (yearTenThousand - 1) * 1_000_000 + 999_999, yearTenThousand * 1_000_000 + 7]
            + (0..<1_000).map { _ in random.next() % (yearTenThousand * 1_000_000) }
        for micros in samples {
            var seconds = time_t(micros / 1_000_000)
            var parts = tm()
            gmtime_r(&seconds, &parts)
            let year = Int(parts.tm_year) + 1900
            func padded(_ value: Int, _ width: Int) -> String {
                let digits = String(value)
                return String(repeating: "0", count: max(0, width - digits.count)) + digits
            }
            let expected = "\(padded(year, 4))-\(padded(Int(parts.tm_mon) + 1, 2))-\(padded(Int(parts.tm_mday), 2))T"
                + "\(padded(Int(parts.tm_hour), 2)):\(padded(Int(parts.tm_min), 2)):\(padded(Int(parts.tm_sec), 2))."
                + "\(padded(Int(micros % 1_000_000), 6))Z"
            #expect(PublishTime(microsecondsSinceEpoch: micros).rfc3339 == expected, "\(micros)")
        }
    }

    @Test("RFC 3339 times: forms accepted, offsets applied, nonsense refused")
    func rfc3339() {
        let noon = PublishTime(rfc3339: "2026-11-25T12:00:00Z")
        #expect(noon?.rfc3339 == "2026-11-25T12:00:00.000000Z")
        #expect(PublishTime(rfc3339: "2026-11-25T13:00:00+01:00") == noon)
        #expect(PublishTime(rfc3339: "2026-11-25 11:30:00-00:30") == noon)
        #expect(PublishTime(rfc3339: "2026-11-25t12:00:00.5z")?.microsecondsSinceEpoch == noon!.microsecondsSinceEpoch + 500_000)
        #expect(PublishTime(rfc3339: "2024-02-29T00:00:00.1234567Z")?.rfc3339 == "2024-02-29T00:00:00.123456Z")
        for bad in ["2026-11-25", "2026-13-01T00:00:00Z", "2025-02-29T00:00:00Z", "2026-11-25T12:00:00", "1969-12-31T23:59:59Z", "2026-11-25T12:00:00.Z"] {
            #expect(PublishTime(rfc3339: bad) == nil, "\(bad)")
        }
    }
}
