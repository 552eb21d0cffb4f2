import Foundation
import NotifyBus
import Testing

/// A restart costs no subscriber a message: `notify subscribe` and a library subscriber reconnect by themselves and
/// resume from the daemon's history, through a clean stop and a kill -9 of the real daemon.
@Suite("Subscribers across daemon restarts", .timeLimit(.minutes(10)))
struct ReconnectTests {
    /// Publishes `m<first>` … `m<last>` to `topic`, each acknowledged, on a connection of its own.
    static func publish(_ numbers: ClosedRange<Int>, to topic: String, on daemon: TestDaemon) async throws {
        let client = try await daemon.client()
        for number in numbers { _ = try await client.publishAcknowledged("m\(number)", to: Topic(topic), retain: false) }
        await client.close()
    }

    @Test("through SIGTERM and kill -9, a library publisher goes on, and each subscriber (notify, ResumingSubscription, a NotifyClient's) prints every acknowledged message once, in order, and no drop")
    func restarts() async throws {
        let directory = try TemporaryDirectory()
        let arguments = ["--history-messages", "1000", "--history-bytes", "1000000"]
        var daemon = try await TestDaemon.start(in: directory, arguments: arguments)
        let cli = try startNotify(["subscribe", "re.t", "--since", "0"], socket: daemon.socketPath)
        let received = Shared<[String]>([])
        let dropped = Shared(0)
        let (progress, tick) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let socketPath = daemon.socketPath
        let library = Task {
            for try await event in ResumingSubscription(socketPath: socketPath, patterns: [try TopicPattern("re.t")], since: .sequence(0)) {
                switch event {
                case .message(let delivery): received.withLock { $0.append(delivery.text ?? "") }
                case .dropped: dropped.withLock { $0 += 1 }
                }
                tick.yield()
            }
        }

        // A NotifyClient's own subscription, which the client carries over to each new connection.
        let subscriber = try await daemon.client()
        let clientReceived = Shared<[String]>([])
        let clientDropped = Shared(0)
        let (clientProgress, clientTick) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let subscription = try await subscriber.subscribe(to: [TopicPattern("re.t")], since: .sequence(0))
        let clientSubscriber = Task {
            for try await event in subscription {
                switch event {
                case .message(let delivery): clientReceived.withLock { $0.append(delivery.text ?? "") }
                case .dropped: clientDropped.withLock { $0 += 1 }
                }
                clientTick.yield()
            }
        }
        // One library publisher throughout: it connects again by itself after each restart.
        let publisher = try await daemon.client()
        let publish = { (numbers: ClosedRange<Int>) in
            for number in numbers { _ = try await publisher.publishAcknowledged("m\(number)", to: Topic("re.t"), retain: false) }
        }
        try await publish(1...100)
        #expect(try await daemon.stop() == 0)
        daemon = try await TestDaemon.start(in: directory, arguments: arguments)
        try await publish(101...200)
        try await daemon.kill()
        daemon = try await TestDaemon.start(in: directory, arguments: arguments)
        try await publish(201...300)

        let expected = (1...300).map { "m\($0)" }
        try await cli.standardOutput.wait(timeout: .seconds(60), "the CLI subscriber to print m300") { $0.hasSuffix("re.t m300\n") }
        #expect(cli.standardOutput.lines == expected.map { "re.t \($0)" })
        #expect(cli.standardError.text.contains("reconnecting"), "it says so: \(cli.standardError.text)")
        #expect(!cli.standardError.text.contains("dropped"), "\(cli.standardError.text)")
        try await withDeadline(.seconds(60), waitingFor: "the library subscriber to get m300") {
            for await _ in progress where received.value.last == "m300" { return }
        }
        #expect(received.value == expected)
        #expect(dropped.value == 0)
        try await withDeadline(.seconds(60), waitingFor: "the NotifyClient subscriber to get m300") {
            for await _ in clientProgress where clientReceived.value.last == "m300" { return }
        }
        #expect(clientReceived.value == expected)
        #expect(clientDropped.value == 0)
        clientSubscriber.cancel()
        library.cancel()
        cli.signal(SIGINT)
        _ = try await cli.exitStatus()
        try await daemon.stop()
    }

    @Test("a NotifyClient's subscription away for longer than the history holds is told exactly what it missed, then gets the rest")
    func clientGapAnnounced() async throws {
        let directory = try TemporaryDirectory()
        let arguments = ["--history-messages", "5"]
        var daemon = try await TestDaemon.start(in: directory, arguments: arguments)
        let client = try await daemon.client()
        let subscription = try await client.subscribe(to: [TopicPattern("re.c")])
        let events = TimedMessages(subscription)
        try await Self.publish(1...3, to: "re.c", on: daemon)
        for number in 1...3 {
            let delivery = try await events.next(waitingFor: "m\(number)")
            #expect(delivery?.text == "m\(number)")
        }
        #expect(try await daemon.stop() == 0)
        // Meanwhile the daemon runs on another socket (same state), where the client cannot find it: 17 messages
        // come, and the history keeps the last 5.
        let elsewhere = try TemporaryDirectory()
        try FileManager.default.createSymbolicLink(atPath: elsewhere.path + "/state", withDestinationPath: directory.path + "/state")
        let interim = try await TestDaemon.start(in: elsewhere, arguments: arguments)
        try await Self.publish(4...20, to: "re.c", on: interim)
        #expect(try await interim.stop() == 0)
        daemon = try await TestDaemon.start(in: directory, arguments: arguments)
        let notice = try await events.nextEvent(waitingFor: "the notice of what the history no longer held")
        #expect(notice == .dropped(DropNotice(topic: try Topic("re.c"), count: 12, firstSequence: 4, lastSequence: 15, reason: .history)))
        var rest: [String] = []
        for number in 16...20 {
            guard let delivery = try await events.next(waitingFor: "m\(number)") else { break }
            rest.append(delivery.text ?? "")
        }
        #expect(rest == (16...20).map { "m\($0)" })
        await client.close()
        try await daemon.stop()
    }

    @Test("a NotifyClient connects again by itself with what it was told (echo off), and gives up after reconnectWithin")
    func clientReconnects() async throws {
        let directory = try TemporaryDirectory()
        var daemon = try await TestDaemon.start(in: directory)
        let client = try await NotifyClient.connect(to: daemon.socketPath, reconnectWithin: .seconds(2))
        try await client.setEcho(false)
        #expect(try await daemon.stop() == 0)
        daemon = try await TestDaemon.start(in: directory)
        // The next call finds its connection gone and makes a new one, told again not to echo.
        let subscription = try await client.subscribe(to: [TopicPattern("e")])
        try await client.publishAcknowledged("own", to: Topic("e"))
        let other = try await daemon.client()
        try await other.publishAcknowledged("theirs", to: Topic("e"))
        let messages = TimedMessages(subscription)
        #expect(try await messages.next(waitingFor: "the next message on subscription")?.text == "theirs", "its own message is not echoed on the new connection")
        await other.close()

        #expect(try await daemon.stop() == 0)
        do {
            _ = try await client.stats()
            Issue.record("a call with no daemon to come back succeeded")
        } catch let error as NotifyClientError {
            #expect(error.kind == .unreachable && error.message.contains("did not come back within"), "\(error)")
        }

        // Without reconnectWithin, a call after the connection is lost throws at once.
        daemon = try await TestDaemon.start(in: directory)
        let oneShot = try await NotifyClient.connect(to: daemon.socketPath, reconnectWithin: nil)
        #expect(try await daemon.stop() == 0)
        await #expect(throws: NotifyClientError.self) { _ = try await oneShot.stats() }
        await client.close()
    }

    @Test("a subscriber away for longer than the history holds is told exactly what it missed, then gets the rest")
    func gapAnnounced() async throws {
        let directory = try TemporaryDirectory()
        let arguments = ["--history-messages", "5"]
        var daemon = try await TestDaemon.start(in: directory, arguments: arguments)
        let cli = try startNotify(["subscribe", "re.g", "--since", "0", "--format", "json"], socket: daemon.socketPath)
        try await Self.publish(1...3, to: "re.g", on: daemon)
        try await cli.standardOutput.wait("the first three messages") { $0.components(separatedBy: "\n").count == 4 }
        // Away while the daemon restarts and 17 more messages come: the history keeps the last 5.
        cli.signal(SIGSTOP)
        #expect(try await daemon.stop() == 0)
        daemon = try await TestDaemon.start(in: directory, arguments: arguments)
        try await Self.publish(4...20, to: "re.g", on: daemon)
        cli.signal(SIGCONT)
        try await cli.standardOutput.wait(timeout: .seconds(60), "the subscriber to catch up") { $0.contains("\"m20\"") }
        let lines = cli.standardOutput.lines
        #expect(lines.count == 9, "\(lines)")
        #expect(lines[3] == #"{"dropped":{"topic":"re.g","count":12,"first_seq":4,"last_seq":15,"reason":"history"}}"#)
        #expect(lines.enumerated().allSatisfy { index, line in index == 3 || line.contains("\"payload\":\"m\(index < 3 ? index + 1 : index + 12)\"") }, "\(lines)")
        cli.signal(SIGINT)
        _ = try await cli.exitStatus()
        try await daemon.stop()
    }

    @Test("notify wait rides out a restart of a daemon with the default history: the matching message published while it reconnects is not missed")
    func waitAcrossRestart() async throws {
        let directory = try TemporaryDirectory()
        let arguments: [String] = []
        var daemon = try await TestDaemon.start(in: directory, arguments: arguments)
        try await Self.publish(1...1, to: "re.w", on: daemon)
        // The waiter talks through a relay, which shows what the daemon sends it.
        let relay = try SocketRelay(path: directory.path + "/relay.sock", to: daemon.socketPath)
        defer { relay.stop() }
        let waiter = try startNotify(["wait", "re.w", "--equals", "go", "--timeout", "60"], socket: relay.path)
        // It is subscribed once the daemon answered its SUB.
        try await relay.fromClients.wait("the waiter to subscribe") { $0.contains(" SUB re.w") }
        let request = try #require(relay.fromClients.text.firstMatch(of: #/#(\d+) SUB re\.w/#)?.1, "\(relay.fromClients.text)")
        try await relay.toClients.wait("the daemon to answer the waiter's SUB") { $0.contains("#\(request) OK\n") }
        #expect(try await daemon.stop() == 0)
        daemon = try await TestDaemon.start(in: directory, arguments: arguments)
        let publisher = try await daemon.client()
        _ = try await publisher.publishAcknowledged("go", to: Topic("re.w"), retain: false)
        #expect(try await waiter.exitStatus() == 0)
        // The exit can be seen before the last of its output is read from the pipe.
        try await waiter.standardOutput.wait("the waiter's output to end") { _ in waiter.standardOutput.isClosed }
        #expect(waiter.standardOutput.text == "go\n")
        #expect(waiter.standardError.text.contains("reconnecting"))
        await publisher.close()
        try await daemon.stop()
    }

    @Test("under overflow=disconnect, notify subscribe reconnects when the daemon says it is going away (a restart), and resumes")
    func disconnectPolicyAcrossRestart() async throws {
        let directory = try TemporaryDirectory()
        var daemon = try await TestDaemon.start(in: directory)
        let cli = try startNotify(["subscribe", "re.d", "--overflow", "disconnect", "--since", "0"], socket: daemon.socketPath)
        try await Self.publish(1...3, to: "re.d", on: daemon)
        try await cli.standardOutput.wait("the first three messages") { $0.contains("m3") }
        #expect(try await daemon.stop() == 0)
        daemon = try await TestDaemon.start(in: directory)
        try await cli.standardError.wait("the subscriber to reconnect") { $0.contains("reconnected") }
        try await Self.publish(4...5, to: "re.d", on: daemon)
        try await cli.standardOutput.wait("the messages after the restart") { $0.contains("m5") }
        #expect(cli.isRunning, "a going-away is not this subscriber's own end for falling behind")
        #expect(cli.standardOutput.lines == (1...5).map { "re.d m\($0)" }, "each once, in order")
        cli.signal(SIGTERM)
        _ = try await cli.exitStatus()
        try await daemon.stop()
    }

    @Test("a NotifyClient call under way when the daemon dies is sent again on the new connection: at least once")
    func callInFlightIsSentAgain() async throws {
        let directory = try TemporaryDirectory()
        var daemon = try await TestDaemon.start(in: directory)
        // The client talks through a relay, which can lose the daemon's answers; a watcher subscribes to the first
        // daemon directly, and sees what it carries out.
        let relay = try SocketRelay(path: directory.path + "/relay.sock", to: daemon.socketPath)
        defer { relay.stop() }
        let watcher = try await NotifyClient.connect(to: daemon.socketPath, reconnectWithin: nil)
        let carriedOut = TimedMessages(try await watcher.subscribe(to: [TopicPattern("re.flight")]))
        let client = try await NotifyClient.connect(to: relay.path, reconnectWithin: .seconds(60))
        #expect(try await client.publishAcknowledged("before", to: Topic("re.flight")) == 1)
        #expect(try await carriedOut.next(waitingFor: "the first publish")?.text == "before")

        // From here the first daemon's answers to the client are lost: the next call is written and carried out,
        // and its OK never read.
        relay.holdReplies()
        let call = Task { try await client.publishAcknowledged("in flight", to: Topic("re.flight")) }
        // The premise: the daemon has the call, and has carried it out, before it dies.
        let first: Delivery?
        do {
            first = try await carriedOut.next(waitingFor: "the first daemon to carry out the call under way")
        } catch {
            throw TestFailure("the first daemon did not carry out the call under way: \(error)")
        }
        try #require(first?.text == "in flight" && first?.sequence == 2, "the first daemon carried out the call: \(String(describing: first))")
        try await daemon.kill()
        daemon = try await TestDaemon.start(in: directory)

        let sequence = try await withDeadline(.seconds(60), waitingFor: "the call under way to be answered by the new daemon") {
            try await call.value
        }
        #expect(sequence > 2, "carried out again by the new daemon, after the 2 the first one gave it: \(sequence)")
        let sent = relay.fromClients.text.components(separatedBy: "in flight").count - 1
        #expect(sent == 2, "written once on each connection: \(relay.fromClients.text)")
        let latest = try await daemon.notify(["latest", "re.flight"])
        #expect(latest.output == "in flight\n", "\(latest.output) \(latest.stderr)")
        await client.close()
        await watcher.close()
        try await daemon.stop()
    }

    /// The least time six connections can take with the pauses of ``ReconnectBackoff`` between them: 50, 100, 200,
    /// 400 and 800 ms, each at least half of itself with the jitter.
    static let fivePauses: Duration = .milliseconds(25 + 50 + 100 + 200 + 400)

    @Test("against a daemon that greets and closes, notify subscribe backs off: a connection that did not last does not start the pauses over")
    func subscribeBacksOff() async throws {
        let directory = try TemporaryDirectory()
        let server = try GreetAndCloseServer(path: directory.path + "/flaky.sock")
        let subscriber = try startNotify(["subscribe", "demo.>"], socket: server.path)
        try await server.waitForConnections(6)
        let times = server.connections
        #expect(times[5] - times[0] >= Self.fivePauses, "six connections in \(times[5] - times[0])")
        subscriber.signal(SIGTERM)
        _ = try await subscriber.exitStatus()
        let lost = subscriber.standardError.lines.filter { $0.contains("reconnecting") }.count
        #expect(lost <= times.count + 1, "one line per lost connection: \(lost) for \(times.count)")
    }

    @Test("against a daemon that greets and closes, a NotifyClient that reconnects backs off the same way")
    func clientBacksOff() async throws {
        let directory = try TemporaryDirectory()
        let server = try GreetAndCloseServer(path: directory.path + "/flaky.sock")
        let client = try await NotifyClient.connect(to: server.path, reconnectWithin: .seconds(30))
        let calls = Task {
            while !Task.isCancelled { _ = try? await client.publish("x", to: Topic("demo.x")); _ = try? await client.flush() }
        }
        // Alone this takes about a second. In the whole parallel run the client's reconnecting task shares the
        // concurrency pool's two threads with every other test: a CI run of 2026-12-07 saw five connections in 38.7 s
        // while a test helper spun one of them (NATSServerProcess's wait, since mended), so the wait is long; a client
        // that stops reconnecting still fails it.
        try await server.waitForConnections(6, deadline: .seconds(120))
        calls.cancel()
        let times = server.connections
        #expect(times[5] - times[0] >= Self.fivePauses, "six connections in \(times[5] - times[0])")
        await client.close()
    }
}
