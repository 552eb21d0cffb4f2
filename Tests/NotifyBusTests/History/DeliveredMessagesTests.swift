import NIOCore
import Testing

@testable import NotifyBus
@testable import NotifyProtocol

/// What a resuming subscription remembers of what it delivered (no socket): replays recognized, notices trimmed,
/// and the table bounded however many topics it sees.
@Suite("What a resuming subscription delivered (no socket)", .timeLimit(.minutes(3)))
struct DeliveredMessagesTests {
    static func delivery(_ topic: String, _ sequence: UInt64, at microseconds: UInt64) -> Delivery {
        Delivery(
            topic: try! Topic(topic),
            sequence: sequence,
            time: PublishTime(microsecondsSinceEpoch: microseconds),
            publisher: Publisher(uid: 1000, pid: 1),
            payload: ByteBuffer(string: "x")
        )
    }

    @Test("a replay of what was delivered is recognized; a topic numbered again from 1, later, is not a replay")
    func repeats() {
        var delivered = DeliveredMessages()
        delivered.record(Self.delivery("t", 5, at: 100), isLive: true)
        #expect(delivered.isRepeat(Self.delivery("t", 5, at: 100)) && delivered.isRepeat(Self.delivery("t", 4, at: 90)))
        #expect(!delivered.isRepeat(Self.delivery("t", 6, at: 110)))
        #expect(!delivered.isRepeat(Self.delivery("t", 1, at: 200)), "renumbered after a restart that lost its log: newer")
        #expect(delivered.resumePoint == PublishTime(microsecondsSinceEpoch: 100))
        delivered.record(Self.delivery("u", 1, at: 300), isLive: false)
        #expect(delivered.resumePoint == PublishTime(microsecondsSinceEpoch: 100), "a replayed message does not move it")
    }

    @Test("a drop notice names only what was not delivered already")
    func notices() {
        var delivered = DeliveredMessages()
        delivered.record(Self.delivery("t", 5, at: 100), isLive: true)
        let notice = { (first: UInt64, last: UInt64) in
            DropNotice(topic: try! Topic("t"), count: last - first + 1, firstSequence: first, lastSequence: last)
        }
        #expect(delivered.missed(notice(1, 5)) == nil)
        #expect(delivered.missed(notice(1, 9)) == notice(6, 9))
        #expect(delivered.missed(notice(7, 9)) == notice(7, 9))
    }

    @Test("bounded: a subscriber that sees 100,000 topics remembers those of the last moment, and still knows their replays")
    func bounded() {
        var delivered = DeliveredMessages()
        for index in 0..<100_000 { delivered.record(Self.delivery("t\(index)", 1, at: UInt64(index)), isLive: true) }
        #expect(delivered.count < 2 * DeliveredMessages.minimumPruneSize, "\(delivered.count) topics remembered")
        #expect(delivered.isRepeat(Self.delivery("t99999", 1, at: 99_999)), "the newest is still known, for the replay after the resume point")
        #expect(!delivered.isRepeat(Self.delivery("t5", 2, at: 100_000)))
    }
}
