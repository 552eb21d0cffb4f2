import Foundation
import NIOCore
import Testing

@testable import NotifyBus
@testable import NotifyBroker
@testable import NotifyProtocol

/// Issue 14, "Acknowledged data": an `OK` means the message is in the state log; when the log cannot be written it
/// is an error, never an `OK`.
@Suite("Acknowledgements and a failing state log (broker, no socket)", .timeLimit(.minutes(3)))
struct AcknowledgementTests {
    @Test("an OK the log could not back is withdrawn; retained publishes are refused until the log is written again")
    func failingLog() throws {
        let directory = StateLogTests.Directory()
        let harness = BrokerHarness()
        let (log, contents) = try StateLog.open(directory: directory.path)
        harness.broker.attach(log, restoring: contents)
        let subscriber = harness.connect()
        subscriber.send("SUB t\n")
        _ = try subscriber.received()
        let client = harness.connect()
        client.send("#1 PUB t 1 ack\na\n")
        #expect(try client.received() == [.ok(requestID: 1, value: 1)])

        log.injectedWriteError = ENOSPC
        client.send("#2 PUB t 1 ack\nb\n#3 PING\n")
        let withdrawn = try client.received()
        #expect(withdrawn.count == 1 && withdrawn.first.map(errorCode) == .storage, "no OK, no PONG after it: \(withdrawn)")
        #expect(withdrawn.first?.requestID == nil)
        #expect(client.transport.closed, "the connection is closed after the error")
        #expect(try subscriber.deliveries() == ["a", "b"], "the message itself was delivered")
        #expect(harness.broker.stateProblem?.contains("No space left on device") == true)

        let other = harness.connect()
        other.send("#9 STATS\n")
        let failingFrames = try other.received()
        guard case .stats(_, let failing)? = failingFrames.first else {
            Issue.record("no STATS: \(failingFrames)")
            return
        }
        #expect(failing["state_log_unsaved"] == 1 && failing["state_log_failures"] == 1, "STATS says the log fails")
        other.send("#4 PUB t 1 ack\nc\n#5 PING\n")
        let refused = try other.received()
        #expect(refused.map(errorCode) == [.storage, nil], "a retained publish is refused while the log fails: \(refused)")
        #expect(refused.first?.requestID == 4 && !other.transport.closed)

        // The disk has room again; once the back-off has passed, the next batch rewrites the log.
        log.injectedWriteError = nil
        harness.now += 1_000_000
        other.send("PING\n")
        #expect(harness.broker.stateProblem == nil)
        other.send("#6 PUB t 1 ack\nd\n")
        #expect(try other.received().last == .ok(requestID: 6, value: 3))
        other.send("#10 STATS\n")
        let savedFrames = try other.received()
        guard case .stats(_, let saved)? = savedFrames.first else {
            Issue.record("no STATS: \(savedFrames)")
            return
        }
        #expect(saved["state_log_unsaved"] == 0 && saved["state_log_failures"] == 1, "written again; the failure still counted")
    }

    @Test("while the log fails, the rewrite is tried with growing pauses, not at every batch")
    func backOff() throws {
        let directory = StateLogTests.Directory()
        let harness = BrokerHarness()
        let (log, contents) = try StateLog.open(directory: directory.path)
        harness.broker.attach(log, restoring: contents)
        var failures = 0
        harness.broker.onEvent = { event in if case .stateNotSaved = event { failures += 1 } }
        let client = harness.connect()
        log.injectedWriteError = EIO
        client.send("PUB t 1\na\n")
        #expect(failures == 1)
        for _ in 0..<100 { client.send("PUB u 1 noretain\nx\n") }
        #expect(failures == 1, "a hundred batches within the pause try no rewrite")
        harness.now += 150_000
        client.send("PING\n")
        #expect(failures == 2, "past the first pause (0.1 s), one more try")
        harness.now += 150_000
        client.send("PING\n")
        #expect(failures == 2, "the second pause is longer (0.2 s)")
    }

    @Test("the pauses between rewrites double from 0.1 s up to 30 s and stay there; retrySavingState tries once a pause has passed, without a client")
    func backOffCap() throws {
        let directory = StateLogTests.Directory()
        let harness = BrokerHarness()
        let (log, contents) = try StateLog.open(directory: directory.path)
        harness.broker.attach(log, restoring: contents)
        var pauses: [Duration] = []
        harness.broker.onEvent = { event in if case .stateNotSaved(_, let pause) = event { pauses.append(pause) } }
        let client = harness.connect()
        log.injectedWriteError = ENOSPC
        client.send("PUB t 18\nwritten-when-saved\n")
        // Each try comes when the pause before it has passed; a little short of it (the harness's clock ticks a
        // microsecond per reading), none does.
        for _ in 0..<12 {
            let pause = UInt64(try #require(pauses.last).components.seconds) * 1_000_000
                + UInt64(try #require(pauses.last).components.attoseconds / 1_000_000_000_000)
            let tries = pauses.count
            harness.now += pause - 10
            harness.broker.retrySavingState()
            #expect(pauses.count == tries, "no try before the pause of \(pause) µs has passed")
            harness.now += 10
            harness.broker.retrySavingState()
            #expect(pauses.count == tries + 1, "one try once it has")
        }
        let expected: [Duration] = [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30, 30, 30, 30].map { .milliseconds(Int($0 * 1000)) }
        #expect(pauses == expected)

        log.injectedWriteError = nil
        harness.now += 30_000_000
        harness.broker.retrySavingState()
        #expect(harness.broker.stateProblem == nil, "the log is written again with no client about")
        #expect(pauses.count == expected.count)
        let file = try Data(contentsOf: URL(fileURLWithPath: directory.logPath))
        #expect(file.range(of: Data("written-when-saved".utf8)) != nil, "the rewrite holds the message whose write failed")
    }
}
