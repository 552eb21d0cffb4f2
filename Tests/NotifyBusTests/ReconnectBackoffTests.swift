import Testing

@testable import NotifyBus
@testable import NotifyProtocol
import TestSupport

/// The pauses of a client between attempts to reconnect (issue 34, 8), without a socket.
@Suite("Reconnect backoff", .timeLimit(.minutes(3)))
struct ReconnectBackoffTests {
    @Test("pauses double from 50 ms to 2 s, each between half and all of its step")
    func pauses() {
        var backoff = ReconnectBackoff()
        var generator = SeededRandom(seed: 34)
        let steps: [Duration] = [.milliseconds(50), .milliseconds(100), .milliseconds(200), .milliseconds(400), .milliseconds(800), .milliseconds(1600), .seconds(2), .seconds(2)]
        var pauses: [Duration] = []
        for step in steps {
            let pause = backoff.pause(using: &generator)
            #expect(pause >= step / 2 && pause <= step, "\(pause) for a step of \(step)")
            pauses.append(pause)
        }
        #expect(Set(pauses.suffix(2)).count == 2, "jitter: two pauses of the same step differ")
    }

    @Test("a connection lost before it lasted 10 s does not start the pauses over; one that lasted does")
    func resetOnlyAfterAStableConnection() {
        var backoff = ReconnectBackoff()
        for _ in 0..<5 { #expect(backoff.lost(after: .milliseconds(1)) != nil) }
        #expect(backoff.step == .milliseconds(1600), "five short connections: the step went on growing")
        #expect(backoff.lost(after: .seconds(10)) == nil, "it lasted: connect again at once")
        #expect(backoff.step == ReconnectBackoff.first)
    }
}
