import Testing

@testable import NotifyBroker
@testable import NotifyProtocol

/// The times messages are stamped with, without a broker.
@Suite("Publish clock", .timeLimit(.minutes(1)))
struct PublishClockTests {
    /// A clock the test sets, in microseconds.
    final class Dial: @unchecked Sendable {
        var now: UInt64 = 1_000
        var reads = 0
        func read() -> PublishTime {
            reads += 1
            return PublishTime(microsecondsSinceEpoch: now)
        }
    }

    @Test("one reading per batch; a clock set back stamps no earlier than the last stamp")
    func perBatch() {
        let dial = Dial()
        var clock = PublishClock(dial.read)
        #expect(clock.stamp().microsecondsSinceEpoch == 1_000)
        dial.now = 2_000
        #expect(clock.stamp().microsecondsSinceEpoch == 1_000 && dial.reads == 1, "the batch's stamp, read once")
        clock.endBatch()
        #expect(clock.stamp().microsecondsSinceEpoch == 2_000)
        clock.endBatch()
        dial.now = 500
        #expect(clock.stamp().microsecondsSinceEpoch == 2_000, "set back: never before the latest stamp")
    }

    @Test("after a topic is forgotten the next stamp is later than all before, within the batch too")
    func forgetting() {
        let dial = Dial()
        var clock = PublishClock(dial.read)
        let first = clock.stamp()
        clock.moveOnAfterForgetting()
        #expect(clock.stamp() > first)
    }

    @Test("a time restored from before a restart is a floor for every stamp")
    func restored() {
        let dial = Dial()
        var clock = PublishClock(dial.read)
        clock.restored(PublishTime(microsecondsSinceEpoch: 9_000))
        clock.restored(PublishTime(microsecondsSinceEpoch: 3_000))
        #expect(clock.stamp().microsecondsSinceEpoch == 9_000 && clock.latest.microsecondsSinceEpoch == 9_000)
    }
}
