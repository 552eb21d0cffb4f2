import NIOCore
import NotifyProtocol
import Testing

@testable import NotifyFleet

/// Where this host's records and head go, when the head is written and what it says, and when records are sent
/// again, without a server: times are deadlines given, the inbox is a fixed one.
@Suite("Own log: this host's records, its head, the acknowledgement deadline", .timeLimit(.minutes(1)))
struct OwnLogTests {
    static let start = NIODeadline.uptimeNanoseconds(1_000_000_000_000)

    static func settings(prefix: String = "fleet", hostName: String = "alpha") throws -> BridgeSettings {
        try #require(
            try BridgeSettings.resolve(
                servers: ["nats://127.0.0.1:4222"],
                exports: [],
                imports: [],
                prefix: prefix,
                hostName: hostName,
                outboxBytes: nil,
                section: [:],
                path: "test"
            )
        )
    }

    static func ownLog(prefix: String = "fleet", hostName: String = "alpha") throws -> OwnLog {
        OwnLog(settings: try settings(prefix: prefix, hostName: hostName), inbox: "_INBOX.7.log", now: start)
    }

    @Test("a record goes to <prefix>_log.<host>, its acknowledgement asked for at <inbox>.<number>, which names it again")
    func records() throws {
        var log = try Self.ownLog()
        #expect(String(buffer: log.recordLine(number: 42, size: 1_200)) == "PUB fleet_log.alpha _INBOX.7.log.42 1200\r\n")
        #expect(log.acknowledgements == "_INBOX.7.log.*")
        #expect(OwnLog.recordNumber(acknowledgedAt: "_INBOX.7.log.42") == 42)
        #expect(OwnLog.recordNumber(acknowledgedAt: "_INBOX.7.log.x") == nil, "no number: no record")
        #expect(OwnLog.recordNumber(acknowledgedAt: "_INBOX.7.log.") == nil)
        #expect(OwnLog.recordNumber(acknowledgedAt: "42") == nil, "no dot")
        #expect(log.headSubject == "fleet_head.alpha")

        log.moved(to: try Self.settings(prefix: "other", hostName: "beta"))
        #expect(String(buffer: log.recordLine(number: 1, size: 9)) == "PUB other_log.beta _INBOX.7.log.1 9\r\n", "the inbox stays")
        #expect(log.headSubject == "other_head.beta")
    }

    @Test("the head is written once per wait when it says less than the log acknowledged, and says each number once")
    func head() throws {
        var log = try Self.ownLog()
        let nothingAcknowledged = log.headWriteIsDue(acknowledged: 0)
        #expect(!nothingAcknowledged, "nothing acknowledged: nothing to say")
        #expect(log.head(epoch: 9, acknowledged: 0) == nil)
        let first = log.headWriteIsDue(acknowledged: 5)
        let whileWaiting = log.headWriteIsDue(acknowledged: 6)
        #expect(first && !whileWaiting, "a write waits already: it says the newest when it runs")
        log.scheduledHeadWriteRuns()
        #expect(log.head(epoch: 9, acknowledged: 6) == ExportStamp(epoch: 9, number: 6))
        #expect(log.head(epoch: 9, acknowledged: 6) == nil, "said already")
        let saidAlready = log.headWriteIsDue(acknowledged: 6)
        let newer = log.headWriteIsDue(acknowledged: 7)
        #expect(!saidAlready && newer)
        log.scheduledHeadWriteRuns()

        // Another log: its head has said nothing, whatever this one's said.
        log.moved(to: try Self.settings(hostName: "beta"))
        let afterMove = log.headWriteIsDue(acknowledged: 3)
        #expect(afterMove)
        #expect(log.head(epoch: 10, acknowledged: 3) == ExportStamp(epoch: 10, number: 3))
    }

    @Test("records outstanding go again once the log has been silent for over 2 s, then not before another 2 s")
    func resend() throws {
        var log = try Self.ownLog()
        let resends = [2_000, 2_001, 4_000, 4_002].map { log.resendIsDue(at: Self.start + .milliseconds($0)) }
        // 2 s is not past the deadline; the wait starts again at a resend.
        #expect(resends == [false, true, false, true])

        log.acknowledgementWaitStarts(at: Self.start + .seconds(10))
        #expect(!log.hasWaited(longerThan: .seconds(10), at: Self.start + .seconds(20)))
        #expect(log.hasWaited(longerThan: .seconds(10), at: Self.start + .milliseconds(20_001)))
        let afterAcknowledgement = log.resendIsDue(at: Self.start + .seconds(11))
        #expect(!afterAcknowledgement, "an acknowledgement ends the wait")
    }

    @Test("the journal hears of unconfirmed messages at the first batch and every hundredth, of the earlier stream once")
    func journal() throws {
        var log = try Self.ownLog()
        let none = log.unconfirmedAreWorthLogging(0)
        #expect(!none, "nothing unconfirmed is not a batch")
        var logged: [Int] = []
        for batch in 1...250 where log.unconfirmedAreWorthLogging(3) {
            logged.append(batch)
        }
        #expect(logged == [1, 100, 200])
        var earlier = [log.earlierStreamIsWorthLogging(), log.earlierStreamIsWorthLogging()]
        log.moved(to: try Self.settings(prefix: "other"))
        earlier.append(log.earlierStreamIsWorthLogging())
        // Once per start, not per log.
        #expect(earlier == [true, false, false])
    }
}
