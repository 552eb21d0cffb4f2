import NIOCore
import NIOEmbedded
import Testing

@testable import NotifyFleet

/// The books of the reads of the log on one connection, and one read's pauses and patience, without a server:
/// times are deadlines given.
@Suite("Log reads: one per key, catch-up's lag, polling and giving up", .timeLimit(.minutes(1)))
struct LogReadsTests {
    static let start = NIODeadline.uptimeNanoseconds(1_000_000_000_000)

    struct Stopped: Error {}

    @Test("one read per key: a second repair of an origin is refused while one runs; an answer to a read let go of is not current")
    func onePerKey() {
        var reads = LogReads()
        let first = reads.beginRepair(of: "alpha", after: 41)
        #expect(first?.next == 42 && first?.key == "alpha")
        #expect(reads.beginRepair(of: "alpha", after: 50) == nil, "the read under way brings the rest")
        let beta = reads.beginRepair(of: "beta", after: 0)
        #expect(beta != nil && !reads.isEmpty)
        reads.end(first!)
        #expect(!reads.isCurrent(first!) && reads.isCurrent(beta!))
        let again = reads.beginRepair(of: "alpha", after: 60)!
        #expect(!reads.isCurrent(first!) && reads.isCurrent(again), "a late answer to the first is dropped")
        reads.end(again)
        reads.end(beta!)
        #expect(reads.isEmpty)
    }

    @Test("catch-up's lag falls as it reads towards the log's end as it was, and is 0 once it ends; stopping hands back its promise")
    func catchUp() async throws {
        let loop = EmbeddedEventLoop()
        var reads = LogReads()
        let done = loop.makePromise(of: Void.self)
        let read = reads.beginCatchUp(after: 100, through: 250, forwarded: 7, done: done)
        #expect(read.host == nil && read.key == "" && read.next == 101)
        #expect(reads.forwardedBeforeCatchUp == 7 && reads.catchUpDone != nil)
        reads.catchUpRead(through: 200)
        #expect(reads.catchUpLag == 50)
        reads.catchUpRead(through: 300)
        #expect(reads.catchUpLag == 0, "past the end as it was: no lag, not an overflow")
        reads.catchUpRead(through: 240)
        reads.end(read)
        #expect(reads.catchUpLag == 0 && reads.isEmpty)

        _ = reads.beginRepair(of: "alpha", after: 1)
        let stopped = reads.stop()
        #expect(reads.isEmpty && reads.catchUpDone == nil)
        stopped?.fail(Stopped())
        await #expect(throws: Stopped.self) { try await done.futureResult.get() }
        let stoppedAgain = reads.stop()
        #expect(stoppedAgain == nil)
    }

    @Test("a read that finds nothing asks again after 5 ms, doubling to 250 ms; something brought starts it over")
    func polling() {
        let read = LogRead(host: "alpha", next: 1, now: Self.start)
        let pauses = (0..<8).map { _ in read.nextPollDelay() }
        #expect(pauses == [5, 10, 20, 40, 80, 160, 250, 250].map(TimeAmount.milliseconds))
        read.broughtSomething(at: Self.start)
        #expect(read.nextPollDelay() == .milliseconds(5))
    }

    @Test("patience counts from what the read last brought, or from a new wait")
    func patience() {
        let read = LogRead(host: "alpha", next: 1, now: Self.start)
        #expect(!read.hasWaited(.seconds(5), at: Self.start + .seconds(4)))
        #expect(read.hasWaited(.seconds(5), at: Self.start + .seconds(5)))
        read.broughtSomething(at: Self.start + .seconds(3))
        #expect(!read.hasWaited(.seconds(5), at: Self.start + .seconds(7)))
        read.waitAgain(from: Self.start + .seconds(10))
        #expect(!read.hasWaited(.seconds(2), at: Self.start + .seconds(11)))
        #expect(read.hasWaited(.seconds(2), at: Self.start + .seconds(12)))
    }

    @Test("three failed gets in a row give up; one that answers in between starts the count again")
    func failures() {
        let read = LogRead(host: nil, next: 1)
        read.failed()
        read.failed()
        #expect(!read.hasFailedTooOften)
        read.answered()
        read.failed()
        read.failed()
        #expect(!read.hasFailedTooOften && read.failures == 2)
        read.failed()
        #expect(read.hasFailedTooOften)
    }
}
