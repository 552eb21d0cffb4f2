import Foundation
import NIOCore
@testable import NotifyCenter
import Synchronization
import Testing

/// What an observation of the table was handed, by sequence number, with a wait for a condition.
private final class Handed: Sendable {
    private let values = Mutex<[UInt64]>([])
    private let (ticks, tick) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))

    func append(_ value: UInt64) {
        values.withLock { $0.append(value) }
        tick.yield()
    }

    var all: [UInt64] { values.withLock { $0 } }

    /// Returns once the last handed is `last` (the suite's time limit fails a test whose event never comes).
    func wait(untilLast last: UInt64) async {
        if all.last == last { return }
        for await _ in ticks where all.last == last { return }
    }
}

private let topic = Topic.literal("table.level")
private let other = Topic.literal("table.other")

/// A delivery of `topic` numbered `sequence`, from this process or another.
private func delivery(_ sequence: UInt64, on topic: Topic = topic, ownProcess: Bool) -> SubscriptionEvent {
    let pid = ownProcess ? getpid() : getpid() &+ 1
    return .message(Delivery(
        topic: topic,
        sequence: sequence,
        time: PublishTime(microsecondsSinceEpoch: 1),
        publisher: Publisher(uid: 0, pid: pid),
        payload: ByteBuffer()
    ))
}

/// A center's queue of observations, without a socket: what it hands to whom, and in which order.
@Suite("A center's observation queue (no daemon)", .timeLimit(.minutes(1)))
struct ObservationTableTests {
    private func observe(_ table: ObservationTable, _ pattern: TopicPattern, into handed: Handed) -> (UInt64, @Sendable (SubscriptionEvent) -> Void) {
        table.prepare(gauge: SubscriptionGauge(limits: .default), pattern: pattern, observer: nil, isAlive: nil, onStop: nil) { event in
            if case .message(let delivery) = event { handed.append(delivery.sequence) }
            return true
        }
    }

    @Test("sendLatest's message is not handed out after a newer one of another process reached the observers")
    func resendAfterNewer() async {
        let table = ObservationTable()
        table.startDelivering()
        let handed = Handed()
        let (_, sink) = observe(table, TopicPattern(topic), into: handed)
        table.resendStarting(for: topic)
        // While the latest (1) was asked for, 2 came from another process and was handed out.
        sink(delivery(2, ownProcess: false))
        await handed.wait(untilLast: 2)
        guard case .message(let latest) = delivery(1, ownProcess: false) else { return }
        table.resend(latest, for: topic)
        sink(delivery(3, ownProcess: false))
        await handed.wait(untilLast: 3)
        #expect(handed.all == [2, 3], "1 is older than what they had: not sent again")
        table.close()
    }

    @Test("sendLatest's message goes to every observation of its topic when nothing newer came")
    func resendReachesObservers() async {
        let table = ObservationTable()
        table.startDelivering()
        let first = Handed(), second = Handed(), elsewhere = Handed()
        let (_, sink) = observe(table, TopicPattern(topic), into: first)
        _ = observe(table, TopicPattern(topic), into: second)
        let (_, otherSink) = observe(table, TopicPattern(other), into: elsewhere)
        table.resendStarting(for: topic)
        guard case .message(let latest) = delivery(7, ownProcess: false) else { return }
        table.resend(latest, for: topic)
        sink(delivery(8, ownProcess: false))
        otherSink(delivery(1, on: other, ownProcess: false))
        await first.wait(untilLast: 8)
        await elsewhere.wait(untilLast: 1)
        #expect(first.all == [7, 8])
        #expect(elsewhere.all == [1], "not of its topic")
        table.close()
    }

    @Test("a post with a sender holds this process's messages on its topic, and what follows, until it is settled; then the sender is left out")
    func holdUntilSettled() async throws {
        let table = ObservationTable()
        table.startDelivering()
        let sender = Handed(), listener = Handed()
        let (senderID, senderSink) = observe(table, TopicPattern(topic), into: sender)
        let (_, listenerSink) = observe(table, try TopicPattern(">"), into: listener)
        let settlement = table.postStarting(to: topic, by: .observation(senderID))
        // The daemon sends the post back before its acknowledgement, then something of another topic.
        senderSink(delivery(5, ownProcess: true))
        listenerSink(delivery(5, ownProcess: true))
        listenerSink(delivery(1, on: other, ownProcess: false))
        // (Whether the consumer reached 5 before this settles is a race here; the hold makes either way right. The
        // integration test NotifyCenterParityTests "post(_:from:)…" fails without it.)
        settlement.settle(5)
        settlement.settle(6)  // once: a second settlement changes nothing
        await listener.wait(untilLast: 1)
        #expect(listener.all == [5, 1], "in the connection's order")
        senderSink(delivery(9, ownProcess: false))
        await sender.wait(untilLast: 9)
        #expect(sender.all == [9], "its own post left out")
        table.close()
    }
}
