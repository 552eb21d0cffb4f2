import NIOCore
import Testing

@testable import NotifyFleet

/// Which server the bridge tries next and how long it waits first, without a server: times are deadlines given.
@Suite("Server rotation: the list in turn, backoff and its cap", .timeLimit(.minutes(1)))
struct ServerRotationTests {
    static let servers = ["nats://a:4222", "nats://b:4222", "nats://c:4222"].map { try! BridgeSettings.Server(parsing: $0) }

    static func names(_ rotation: ServerRotation) -> (server: String, position: Int) {
        ("\(rotation.current(of: servers))", rotation.position(among: servers.count))
    }

    @Test("the servers are tried in the list's order, round and round; starting over goes back to the first")
    func order() {
        var rotation = ServerRotation()
        var tried: [String] = []
        for _ in 0..<5 {
            tried.append(Self.names(rotation).server)
            _ = rotation.next()
        }
        #expect(tried == ["nats://a:4222", "nats://b:4222", "nats://c:4222", "nats://a:4222", "nats://b:4222"])
        #expect(Self.names(rotation).position == 3)
        rotation.startOver()
        #expect(Self.names(rotation).server == "nats://a:4222" && Self.names(rotation).position == 1)
    }

    @Test("the wait doubles from 0.1 s while none answers, and stops growing at 5 s")
    func backoff() {
        var rotation = ServerRotation()
        let waits = (0..<9).map { _ in rotation.next() }
        #expect(waits == [100, 200, 400, 800, 1_600, 3_200, 5_000, 5_000, 5_000].map(TimeAmount.milliseconds))
    }

    @Test("a connection that lasted 10 s ends the backoff; one that lasted less leaves it growing")
    func shortConnection() {
        let start = NIODeadline.uptimeNanoseconds(1_000_000_000_000)
        var rotation = ServerRotation()
        for _ in 0..<4 { _ = rotation.next() }
        rotation.connected(at: start)
        rotation.disconnected(at: start + .seconds(9))
        #expect(rotation.next() == .milliseconds(1_600), "dropped after 9 s: the doubling goes on")
        rotation.connected(at: start + .seconds(20))
        rotation.disconnected(at: start + .seconds(30))
        #expect(rotation.next() == .milliseconds(100), "after 10 s: the shortest wait again")
        #expect(rotation.next() == .milliseconds(200))
    }

    @Test("failures are logged at the first of a run and every hundredth; a refused login shows until a connection is made")
    func runOfFailures() {
        var rotation = ServerRotation()
        var logged: [Int] = []
        for attempt in 1...250 {
            rotation.attemptFailed()
            if rotation.failureIsWorthLogging { logged.append(attempt) }
        }
        #expect(logged == [1, 100, 200])
        rotation.refusedLogin(by: Self.servers[1])
        #expect(rotation.loginRefused == "NATS LOGIN REFUSED by nats://b:4222")
        rotation.connected(at: .now())
        #expect(rotation.failedAttempts == 0 && rotation.loginRefused == nil)
        rotation.attemptFailed()
        #expect(rotation.failureIsWorthLogging, "a new run logs its first failure")
    }
}
