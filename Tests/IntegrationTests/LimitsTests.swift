import Foundation
import NIOCore
import NotifyBus
import Testing

/// The daemon's limits, hit through the real daemon with the real `notify`: each gives its documented error and
/// exit status, and nobody else notices.
@Suite("Limits of a real notifyd", .timeLimit(.minutes(10)))
struct LimitsTests {
    @Test("past max-connections-per-user, another uid is not held back by that one's connections (needs root, to be another uid)", .enabled(if: getuid() == 0))
    func connectionsPerUserLeaveOthers() async throws {
        let daemon = try await TestDaemon.start(arguments: ["--max-connections-per-user", "3"])
        let held = try (0..<3).map { _ in try RawSocket(path: daemon.socketPath) }
        for raw in held {
            #expect(await raw.read { String(decoding: $0, as: UTF8.self).contains("HELLO") })
        }
        #expect(try await daemon.notify(["send", "limits.t", "x"]).status == 75, "this uid is at its limit")
        chmod(daemon.directory.path, 0o755)
        let other = try await notifyAs(uid: 65534, ["send", "limits.other", "from nobody"], socket: daemon.socketPath)
        #expect(other.status == 0, "stderr: \(other.stderr)")
        #expect(try await daemon.stop() == 0)
    }

    @Test("--max-queued-bytes-total bounds what waits for all stalled subscribers together, of two uids (needs root, to be two uids)", .enabled(if: getuid() == 0))
    func queuedBytesTotal() async throws {
        let total = 4 << 20
        // Each uid may hold the whole total: only the total binds the two together.
        let daemon = try await TestDaemon.start(arguments: ["--max-queued-bytes-total", "\(total)", "--max-queued-bytes-per-user", "\(total)"])
        chmod(daemon.directory.path, 0o755)
        let mine = try startNotify(["subscribe", "q.>", "--no-reconnect"], socket: daemon.socketPath)
        let theirs = try ChildProcess(
            "/usr/bin/setpriv",
            ["--reuid=65534", "--regid=65534", "--clear-groups", Binaries.notify, "--socket", daemon.socketPath, "subscribe", "q.>", "--no-reconnect"]
        )
        let client = try await daemon.client()
        try await BackpressureTests.waitForSubscriptions(2, on: client)
        mine.signal(SIGSTOP)
        theirs.signal(SIGSTOP)

        let payload = ByteBuffer(repeating: UInt8(ascii: "q"), count: 16 << 10)
        for _ in 0..<20 {
            try await client.publish(Array(repeating: payload, count: 100), to: Topic("q.flood"), retain: false)
            try await client.flush()
        }
        let stats = try await client.stats()
        let queued = try #require(stats["queued_bytes"])
        // Past the total, each connection takes at most a batch more before the flush that counts it (some 300 KiB
        // here); without the total, each uid would hold its own 4 MiB, 8 in all.
        #expect(queued <= UInt64(total + (1 << 20)), "\(queued) bytes wait for the two stalled subscribers; the total is \(total)")
        #expect(stats["dropped"] ?? 0 > 0, "32 MiB published for two subscribers that read nothing: some was dropped, and announced")

        for subscriber in [mine, theirs] { subscriber.signal(SIGCONT) }
        for subscriber in [mine, theirs] {
            try await subscriber.standardError.wait("the drop notice") { $0.contains("dropped") }
            subscriber.signal(SIGTERM)
            _ = try await subscriber.exitStatus()
        }
        await client.close()
        try await daemon.stop()
    }

    @Test("past max-connections-per-user that uid is refused (ERR limit, exit 75) until it closes one")
    func connectionsPerUser() async throws {
        let daemon = try await TestDaemon.start(arguments: ["--max-connections-per-user", "3"])
        var held = try (0..<3).map { _ in try RawSocket(path: daemon.socketPath) }
        for raw in held {
            #expect(await raw.read { String(decoding: $0, as: UTF8.self).contains("HELLO") })
        }

        let refused = try await daemon.notify(["send", "limits.t", "x"])
        #expect(refused.status == 75, "stderr: \(refused.stderr)")
        #expect(refused.stderr.contains("uid \(getuid()) already has 3 connections open (the limit per user)"))
        let raw = try RawSocket(path: daemon.socketPath)
        #expect(await raw.isClosedByPeer(), "the refused connection is closed")
        #expect(raw.lines.count == 1 && raw.lines[0].hasPrefix("ERR limit "), "ERR instead of the greeting: \(raw.lines)")

        // A closed connection frees its place. The daemon lets it go in the turn of its one event loop where it closes
        // its end, before it takes another connection: once this end reads that close, the next connection is let in.
        let leaving = held.removeLast()
        leaving.shutdownWriting()
        #expect(await leaving.isClosedByPeer(), "the daemon closed the connection whose client had ended it")
        let accepted = try await daemon.notify(["send", "limits.t", "after"])
        #expect(accepted.status == 0, "stderr: \(accepted.stderr)")
        #expect(try await daemon.stop() == 0)
    }

    @Test("past max-connections everyone is refused with the sentence saying so; held connections keep working")
    func connectionsInTotal() async throws {
        let daemon = try await TestDaemon.start(arguments: ["--max-connections", "2", "--max-connections-per-user", "2"])
        let subscriber = try await daemon.client()
        let subscription = try await subscriber.subscribe(to: [TopicPattern("limits.>")])
        let publisher = try await daemon.client()

        let refused = try await daemon.notify(["send", "limits.t", "x"])
        #expect(refused.status == 75)
        #expect(refused.stderr.contains("the daemon already serves 2 connections (its limit)"), "stderr: \(refused.stderr)")
        do {
            _ = try await NotifyClient.connect(to: daemon.socketPath)
            Issue.record("a third connection was accepted")
        } catch let error as NotifyClientError {
            #expect(error.kind == .refused && error.refusal?.code == .limitReached)
        }

        try await publisher.publishAcknowledged("still here", to: Topic("limits.t"))
        let messages = TimedMessages(subscription)
        #expect(try await messages.next(waitingFor: "the next message on subscription")?.text == "still here")
        await subscriber.close()
        await publisher.close()
        #expect(try await daemon.stop() == 0)
    }

    @Test("past max-retained-bytes a retained publish is refused (exit 75) and not delivered; --no-retain still goes")
    func retainedBytes() async throws {
        let daemon = try await TestDaemon.start(arguments: ["--max-retained-bytes", "10", "--max-retained-bytes-per-user", "10"])
        let listener = try await daemon.client()
        let subscription = try await listener.subscribe(to: [TopicPattern("kept.>")])
        #expect(try await daemon.notify(["send", "kept.a", "123456"]).status == 0)
        let refused = try await daemon.notify(["send", "kept.b", "12345"])
        #expect(refused.status == 75)
        #expect(refused.stderr.contains("past 10 bytes of buffered messages (its limit)"), "stderr: \(refused.stderr)")
        #expect(try await daemon.notify(["latest", "kept.b"]).status == 1, "nothing was buffered")
        #expect(try await daemon.notify(["send", "--no-retain", "kept.b", "12345"]).status == 0)
        #expect(try await daemon.notify(["send", "kept.a", "1234567890"]).status == 0, "a replaced message frees its bytes")

        let received = try await deliveries(of: subscription, waitingFor: "the three accepted messages") { $0.count == 3 }.map { $0.text ?? "" }
        #expect(received == ["123456", "12345", "1234567890"], "the refused publish reached nobody")
        await listener.close()
        #expect(try await daemon.stop() == 0)
    }

    @Test("max-topic-length is announced in the greeting and enforced: a longer topic or pattern is invalid input (65)")
    func topicLength() async throws {
        let daemon = try await TestDaemon.start(arguments: ["--max-topic-length", "8"])
        let client = try await daemon.client()
        #expect(client.greeting.limits.maxTopic == 8)
        #expect(try await daemon.notify(["send", "abcd.efg", "x"]).status == 0)
        let long = try await daemon.notify(["send", "abcd.efgh", "x"])
        #expect(long.status == 65, "stderr: \(long.stderr)")
        #expect(long.stderr.contains("8"))
        let pattern = try await daemon.notify(["subscribe", "abcd.efg.>"])
        #expect(pattern.status == 65)
        await client.close()
        #expect(try await daemon.stop() == 0)
    }

    @Test("notify topics lists 25,000 topics whole, though the daemon answers in pages of 10,000")
    func topicsInPages() async throws {
        let daemon = try await TestDaemon.start()
        let raw = try RawSocket(path: daemon.socketPath)
        try raw.send((0..<25_000).map { "PUB page.\($0) 0 noretain\n\n" }.joined() + "PING\n")
        #expect(await raw.read(timeout: .seconds(60)) { String(decoding: $0.suffix(64), as: UTF8.self).contains("PONG") })
        let listed = try await daemon.notify(["topics", "page.>", "--format", "json"])
        #expect(listed.status == 0, "\(listed.stderr)")
        #expect(listed.output.components(separatedBy: "\"topic\":").count - 1 == 25_000)
        let one = try await daemon.notify(["topics", "page.24999"])
        #expect(one.output.split(separator: "\n").count == 2, "a plain name: the header and its line")
        try await daemon.stop()
    }

}

/// Runs `notify` as another user (the test runs as root), through setpriv.
func notifyAs(uid: UInt32, gid: UInt32? = nil, groups: [UInt32] = [], _ arguments: [String], socket: String) async throws -> CommandResult {
    let groupOption = groups.isEmpty ? "--clear-groups" : "--groups=" + groups.map(String.init).joined(separator: ",")
    let child = try ChildProcess(
        "/usr/bin/setpriv",
        ["--reuid=\(uid)", "--regid=\(gid ?? uid)", groupOption, Binaries.notify, "--socket", socket] + arguments
    )
    let status = try await child.exitStatus(timeout: .seconds(60))
    try await child.standardOutput.wait("notify's output to end") { _ in child.standardOutput.isClosed }
    try await child.standardError.wait("notify's errors to end") { _ in child.standardError.isClosed }
    return CommandResult(status: status, stdout: child.standardOutput.bytes, stderr: child.standardError.text)
}
