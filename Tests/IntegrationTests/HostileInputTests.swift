import Foundation
import NIOCore
import NotifyBus
import Testing

/// Bad input sent raw on the socket: each gets its documented error, and everyone else is served as before.
@Suite("Bad input on a real notifyd", .timeLimit(.minutes(10)))
struct HostileInputTests {
    @Test("malformed frames, invalid topics and oversized payloads get their errors; others see no difference")
    func badClientsDoNotDisturbOthers() async throws {
        let daemon = try await TestDaemon.start(arguments: ["--max-payload", "1000"])
        let listener = try await daemon.client()
        let subscription = try await listener.subscribe(to: [TopicPattern("good")])
        let publisher = try await daemon.client()
        var sent = 0
        func publishGood() async throws {
            sent += 1
            try await publisher.publishAcknowledged("g\(sent)", to: Topic("good"))
        }

        // `then`: what the daemon does next. `.answersPing`: the connection reads the next frame normally;
        // `.skipsPayload`: it is discarding a declared payload (a PING now would be part of it); `.closes`: framing
        // was lost.
        enum Then { case answersPing, skipsPayload, closes }
        // Junk that is the same on every run: bytes scattered by a multiplicative hash.
        let highBytes = (0..<300).map { UInt8(0x80 + ($0 &* 2_654_435_761 >> 7) % 128) }
        let anyBytes = (0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 11) }.filter { $0 != 0x0A }
        let cases: [(name: String, input: [UInt8], code: String, then: Then)] = [
            ("unknown verb", bytes("FROB\n"), "ERR unknown-op", .answersPing),
            ("PUB without its size", bytes("PUB good\n"), "ERR malformed", .answersPing),
            ("empty token", bytes("PUB a..b 1\nx\n"), "ERR invalid-topic", .answersPing),
            ("wildcard in a published topic", bytes("PUB good.* 1\nx\n"), "ERR invalid-topic", .answersPing),
            ("misplaced >", bytes("SUB a.>.b\n"), "ERR invalid-topic", .answersPing),
            ("invalid UTF-8 topic", bytes("PUB good.") + [0xC3, 0x28] + bytes(" 1\nx\n"), "ERR invalid-topic", .answersPing),
            ("overlong UTF-8 pattern", bytes("SUB ") + [0xC0, 0xAE] + bytes("\n"), "ERR invalid-topic", .answersPing),
            ("payload over max_payload", bytes("PUB good 5000\n" + String(repeating: "z", count: 5000) + "\n"), "ERR too-large", .answersPing),
            ("a 2 GiB length", bytes("PUB good 2147483648\n" + String(repeating: "z", count: 100_000)), "ERR too-large", .skipsPayload),
            ("a 19-digit length", bytes("PUB good 9999999999999999999\nz"), "ERR too-large", .skipsPayload),
            ("a 20-digit length past 64 bits", bytes("PUB good 99999999999999999999\nz"), "ERR too-large", .skipsPayload),
            ("a 21-digit length", bytes("PUB good 100000000000000000000\n"), "ERR malformed", .answersPing),
            ("reserved topic", bytes("PUB $notifyd.x 1\nx\n"), "ERR not-permitted", .answersPing),
            ("UNSUB of nothing", bytes("UNSUB never\n"), "ERR not-found", .answersPing),
            ("binary junk on one line", highBytes + [0x0A], "ERR unknown-op", .answersPing),
            ("a length shorter than the payload", bytes("PUB good 2\nabcd\n"), "ERR malformed", .closes),
            ("a line without end", bytes(String(repeating: "J", count: 5000)), "ERR malformed", .closes),
            ("binary junk without line breaks", anyBytes, "ERR malformed", .closes),
        ]
        for bad in cases {
            try await publishGood()
            let raw = try RawSocket(path: daemon.socketPath)
            try raw.send(bad.input)
            if bad.then == .answersPing { try raw.send("PING\n") }
            let expectedEnd = bad.then == .answersPing ? "PONG" : bad.code
            #expect(await raw.read { String(decoding: $0, as: UTF8.self).contains(expectedEnd) }, "\(bad.name): got \(raw.lines)")
            #expect(raw.lines.dropFirst().first?.hasPrefix(bad.code) == true, "\(bad.name): got \(raw.lines)")
            if bad.then == .closes {
                #expect(await raw.isClosedByPeer(), "\(bad.name): framing was lost, so the daemon closes")
            }
            try await publishGood()
        }

        // Clients that vanish mid-frame (in a line, in a payload whose length lies), and one that connects and
        // never speaks.
        for truncated in ["PUB goo", "PUB good 100\nonly part of it", "#12", "SUB good.>"] {
            let vanishing = try RawSocket(path: daemon.socketPath)
            try vanishing.send(truncated)
        }
        let silent = try RawSocket(path: daemon.socketPath)
        try await publishGood()

        let total = sent
        let received = try await deliveries(of: subscription, waitingFor: "the \(total) good messages") { $0.count == total }.map { $0.text ?? "" }
        #expect(received == (1...sent).map { "g\($0)" }, "the listener got every good message and nothing else")
        let stats = try await listener.stats()
        #expect(stats["messages_in"] == UInt64(sent))
        _ = silent
        await listener.close()
        await publisher.close()
        #expect(try await daemon.stop() == 0)
    }
}

extension HostileInputTests {
    @Test("a client that subscribes to 100,000 patterns gets 10,000 (its limit) and ERR limit for the rest; others see no difference")
    func hundredThousandPatterns() async throws {
        let daemon = try await TestDaemon.start()
        let listener = try await daemon.client()
        let subscription = try await listener.subscribe(to: [TopicPattern("calm.>")])
        let publisher = try await daemon.client()

        let greedy = try RawSocket(path: daemon.socketPath)
        var requests = ""
        for index in 0..<100_000 { requests += "SUB p.\(index).>\n" }
        requests += "#1 PING\n"
        // Written on a thread of its own: the replies come back while the requests still go out.
        let bytes = Array(requests.utf8)
        async let written: Void = onOwnThread { try greedy.send(bytes) }
        try await publisher.publishAcknowledged("during", to: Topic("calm.x"))
        #expect(await greedy.read(timeout: .seconds(120)) { String(decoding: $0.suffix(12), as: UTF8.self).hasSuffix("#1 PONG\n") })
        try await written
        let lines = greedy.lines.dropFirst()  // the greeting
        #expect(lines.count { $0 == "OK" } == 10_000)
        #expect(lines.count { $0.hasPrefix("ERR limit this connection already holds 10000 subscriptions") } == 90_000)

        // Its subscriptions work, and nobody else noticed.
        try await publisher.publishAcknowledged("to greedy", to: Topic("p.9999.x"))
        try await publisher.publishAcknowledged("after", to: Topic("calm.x"))
        try greedy.send("#2 PING\n")
        #expect(await greedy.read { String(decoding: $0.suffix(200), as: UTF8.self).hasSuffix("#2 PONG\n") })
        #expect(greedy.lines.contains { $0.hasPrefix("MSG p.9999.x ") })
        let messages = TimedMessages(subscription)
        #expect(try await messages.next(waitingFor: "the next message on subscription")?.text == "during")
        #expect(try await messages.next(waitingFor: "the next message on subscription")?.text == "after")
        #expect(try await listener.stats()["subscriptions"] == 10_001)
        await listener.close()
        await publisher.close()
        #expect(try await daemon.stop() == 0)
    }

    @Test("a publish flood is served in full without starving others; one that never reads its replies is held back, not buffered for")
    func publishFlood() async throws {
        // Replies may wait in a connection's write buffer up to half of max-queued-bytes; keep that small.
        let daemon = try await TestDaemon.start(arguments: ["--max-queued-bytes", "2097152"])
        let listener = try await daemon.client()
        let subscription = try await listener.subscribe(to: [TopicPattern("calm.>")])
        let publisher = try await daemon.client()

        // 100,000 fire-and-forget publishes as fast as one socket takes them, while others talk.
        let flooder = try RawSocket(path: daemon.socketPath)
        let total = 100_000
        var floodBytes: [UInt8] = []
        floodBytes.reserveCapacity(total * 20)
        for index in 1...total { floodBytes += "PUB flood 8\n\(String(index).padding(toLength: 8, withPad: " ", startingAt: 0))\n".utf8 }
        let allFlood = floodBytes
        async let flooded: Void = onOwnThread { try flooder.send(allFlood) }
        let messages = TimedMessages(subscription)
        for index in 0..<200 {
            try await publisher.publishAcknowledged("c\(index)", to: Topic("calm.x"))
            #expect(try await messages.next(waitingFor: "the next message on subscription")?.text == "c\(index)")
        }
        try await flooded
        try flooder.send("#1 PING\n")
        #expect(await flooder.read { String(decoding: $0.suffix(100), as: UTF8.self).hasSuffix("#1 PONG\n") })
        let latest = try await publisher.latest(Topic("flood"))
        #expect(latest?.text == String(total).padding(toLength: 8, withPad: " ", startingAt: 0), "every publish was taken, the last one last")
        #expect(latest?.sequence == UInt64(total))

        // A client that never reads its replies, each many times the size of its request: the daemon stops
        // carrying out its requests and reading it once they pile up, so most of what it sends never gets in, and
        // the daemon holds what one connection may, not what those requests would make.
        for index in 0..<1_000 { try await publisher.publish("x", to: Topic("many.topic.\(index)")) }
        try await publisher.flush()
        let rssBefore = try residentKiB(of: daemon.child.pid)
        let deaf = try RawSocket(path: daemon.socketPath)
        let request = Array("TOPICS\n".utf8)
        let chunk = Array([[UInt8]](repeating: request, count: 65_536 / request.count).joined())
        let limit = 16 << 20
        let (sent, stopped) = try await onOwnThread { deaf.sendUntilPeerStopsReading(chunk, limit: limit) }
        #expect(stopped, "the daemon stopped reading the client that does not read")
        #expect(sent < 4 << 20, "it took \(sent) bytes of requests, each answered by some 90 KB")
        for index in 0..<200 {
            try await publisher.publishAcknowledged("d\(index)", to: Topic("calm.y"))
            #expect(try await messages.next(waitingFor: "the next message on subscription")?.text == "d\(index)")
        }
        let rssDuring = try residentKiB(of: daemon.child.pid)
        #expect(rssDuring < rssBefore + 24 << 10, "RSS \(rssBefore) KiB before, \(rssDuring) KiB while it is held back")
        deaf.shutdown()
        await listener.close()
        await publisher.close()
        #expect(try await daemon.stop() == 0)
    }
}

/// The resident set size of process `pid`, in KiB, from /proc.
func residentKiB(of pid: pid_t) throws -> Int {
    let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
    guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
        let value = line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first.flatMap({ Int($0) })
    else { throw TestFailure("no VmRSS for \(pid)") }
    return value
}

private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

/// Subscribers that do not keep up, through the real daemon.
@Suite("Slow subscribers on a real notifyd", .timeLimit(.minutes(10)))
struct SlowSubscriberTests {
    /// Frames a raw connection received, decoded.
    static func frames(_ bytes: [UInt8]) throws -> [ServerFrame] {
        var decoder = ServerFrameDecoder()
        var buffer = ByteBuffer(bytes: bytes)
        var frames: [ServerFrame] = []
        while let frame = try decoder.decode(buffer: &buffer) { frames.append(frame) }
        return frames
    }

    /// Publishes `count` messages to `topic`, in steps that `listener` keeps up with, so that only a subscriber
    /// that does not read falls behind.
    static func publish(_ count: Int, to topic: Topic, with publisher: NotifyClient, keepingUp listener: NotifySubscription) async throws -> [UInt64] {
        var sequences: [UInt64] = []
        let deliveries = TimedMessages(listener)
        let step = 2_000
        for start in stride(from: 0, to: count, by: step) {
            for index in start..<min(start + step, count) {
                try await publisher.publish("m\(index)", to: topic, retain: false)
            }
            for _ in start..<min(start + step, count) {
                let delivery = try #require(try await deliveries.next(waitingFor: "the next message on listener"))
                sequences.append(delivery.sequence)
            }
        }
        return sequences
    }

    @Test("a subscriber that never reads: another gets all 100,000 messages, and its own deliveries and drops add up")
    func neverReads() async throws {
        // 2 MiB waiting at most (half in the write buffer, half queued): far less than 100,000 messages.
        let daemon = try await TestDaemon.start(arguments: ["--max-queued-bytes", "2097152"])
        let stalled = try RawSocket(path: daemon.socketPath)
        try stalled.send("SUB flood\nPING\n")
        #expect(await stalled.read { String(decoding: $0, as: UTF8.self).contains("PONG") })
        let received = stalled.received.count

        let listener = try await daemon.client()
        let publisher = try await daemon.client()
        let subscription = try await listener.subscribe(to: [TopicPattern("flood")])
        let total = 100_000
        let sequences = try await Self.publish(total, to: Topic("flood"), with: publisher, keepingUp: subscription)
        #expect(sequences == Array(1...UInt64(total)), "the subscriber that reads got every message, in order")

        // Now the stalled one reads: what was queued for it, the notices of what was dropped, then its PONG.
        try stalled.send("PING\n")
        #expect(await stalled.read(timeout: .seconds(60)) { String(decoding: $0[received...], as: UTF8.self).hasSuffix("PONG\n") })
        let frames = try Self.frames(Array(stalled.received[received...]))
        var delivered: [UInt64] = []
        var droppedCount: UInt64 = 0
        var notices: [DropNotice] = []
        for frame in frames {
            switch frame {
            case .delivery(let delivery): delivered.append(delivery.sequence)
            case .dropped(let notice):
                droppedCount += notice.count
                notices.append(notice)
            default: break
            }
        }
        #expect(droppedCount > 0, "it fell behind, so messages were dropped")
        #expect(UInt64(delivered.count) + droppedCount == UInt64(total), "delivered + dropped = published")
        #expect(delivered == delivered.sorted(), "what it got is in order")
        // A notice's range may hold messages delivered between its drops (it says so by a count below its size), but
        // never more than the range has room for, and its first and last are messages that were dropped.
        let deliveredSet = Set(delivered)
        for notice in notices {
            let range = notice.firstSequence...notice.lastSequence
            let deliveredInside = UInt64(delivered.count { range.contains($0) })
            #expect(deliveredInside + notice.count <= UInt64(range.count), "\(notice): \(deliveredInside) of its range were delivered")
            #expect(!deliveredSet.contains(range.lowerBound) && !deliveredSet.contains(range.upperBound), "\(notice) names a delivered message")
        }
        let stats = try await publisher.stats()
        #expect(stats["dropped"] == droppedCount)
        #expect(stats["connections"] == 3, "the stalled subscriber was not disconnected (drop-oldest)")
        await listener.close()
        await publisher.close()
        try await daemon.stop()
    }

    @Test("overflow=disconnect closes a subscriber that falls behind; others are not affected")
    func disconnectPolicy() async throws {
        let daemon = try await TestDaemon.start(arguments: ["--max-queued-messages", "100", "--max-queued-bytes", "4194304"])
        let stalled = try RawSocket(path: daemon.socketPath)
        try stalled.send("SUB flood overflow=disconnect\nPING\n")
        #expect(await stalled.read { String(decoding: $0, as: UTF8.self).contains("PONG") })
        let listener = try await daemon.client()
        let publisher = try await daemon.client()
        let subscription = try await listener.subscribe(to: [TopicPattern("flood")])
        let payload = ByteBuffer(repeating: UInt8(ascii: "x"), count: 16 << 10)
        let deliveries = TimedMessages(subscription)
        // 16 KiB messages: the kernel's and NIO's buffers fill within a few hundred, then its queue of 100.
        for _ in 0..<2_000 {
            try await publisher.publish(payload, to: Topic("flood"), retain: false)
            _ = try #require(try await deliveries.next(waitingFor: "the next message on listener"))
        }
        #expect(await stalled.isClosedByPeer(), "the daemon closed it")
        try await daemon.child.standardError.wait("the disconnection logged") { $0.contains("disconnected a subscriber that fell behind") }
        let stats = try await publisher.stats()
        #expect(stats["connections"] == 2)
        await listener.close()
        await publisher.close()
        try await daemon.stop()
    }

    @Test("overflow=latest-only keeps the newest message of each topic for a subscriber that falls behind")
    func latestOnlyPolicy() async throws {
        let daemon = try await TestDaemon.start(arguments: ["--max-queued-messages", "50", "--max-queued-bytes", "2097152"])
        let stalled = try RawSocket(path: daemon.socketPath)
        try stalled.send("SUB gauge.* overflow=latest-only\nPING\n")
        #expect(await stalled.read { String(decoding: $0, as: UTF8.self).contains("PONG") })
        let received = stalled.received.count
        let publisher = try await daemon.client()
        let payload = String(repeating: "g", count: 8 << 10)
        for round in 1...300 {
            for gauge in 0..<5 {
                try await publisher.publish("\(round) \(payload)", to: Topic("gauge.\(gauge)"), retain: false)
            }
        }
        try await publisher.flush()
        try stalled.send("PING\n")
        #expect(await stalled.read(timeout: .seconds(60)) { String(decoding: $0[received...], as: UTF8.self).hasSuffix("PONG\n") })
        var lastByTopic: [String: UInt64] = [:]
        var delivered = 0
        var dropped: UInt64 = 0
        for frame in try Self.frames(Array(stalled.received[received...])) {
            if case .delivery(let delivery) = frame {
                lastByTopic[delivery.topic.name] = delivery.sequence
                delivered += 1
            }
            if case .dropped(let notice) = frame { dropped += notice.count }
        }
        #expect(dropped > 0)
        #expect(UInt64(delivered) + dropped == 1_500)
        for gauge in 0..<5 {
            #expect(lastByTopic["gauge.\(gauge)"] == 300, "the newest message of every topic arrived")
        }
        await publisher.close()
        try await daemon.stop()
    }

    @Test("one uid's stalled subscribers hold at most its budget of queued bytes, what waits in their write buffers included")
    func budgetIncludesWriteBuffers() async throws {
        // Each connection may hold 8 MiB in its write buffer and 8 MiB in its queue; the uid, 4 MiB in all.
        let budget = 4 << 20
        let daemon = try await TestDaemon.start(arguments: [
            "--max-queued-bytes", "\(16 << 20)", "--max-queued-bytes-per-user", "\(budget)", "--max-payload", "\(64 << 10)",
        ])
        let stalled = try (0..<4).map { index in
            let socket = try RawSocket(path: daemon.socketPath)
            try socket.send("SUB big.\(index)\nPING\n")
            return socket
        }
        for socket in stalled { #expect(await socket.read { String(decoding: $0, as: UTF8.self).contains("PONG") }) }
        let publisher = try await daemon.client()
        let rssBefore = try residentKiB(of: daemon.child.pid)
        let payload = ByteBuffer(repeating: UInt8(ascii: "x"), count: 60_000)
        let perTopic = 160  // 9.6 MB a subscriber: past its write buffer's own mark, let alone the uid's budget
        for _ in 0..<perTopic {
            for index in 0..<4 { try await publisher.publish(payload, to: Topic("big.\(index)"), retain: false) }
        }
        try await publisher.flush()
        let stats = try await publisher.stats()
        let rssDuring = try residentKiB(of: daemon.child.pid)
        // One read loop's deliveries per connection may go out before the flush that counts them.
        #expect(try #require(stats["queued_bytes"]) <= UInt64(budget + 4 * (512 << 10)), "\(stats)")
        #expect(rssDuring < rssBefore + 16 << 10, "RSS \(rssBefore) KiB before, \(rssDuring) KiB with 4 stalled subscribers")

        // Each reads now: what waited for it, and the notices of what was dropped, add up to what was published.
        for socket in stalled {
            let start = socket.received.count
            try socket.send("PING\n")
            #expect(await socket.read(timeout: .seconds(60)) { String(decoding: $0[start...].suffix(5), as: UTF8.self) == "PONG\n" })
            var delivered = 0
            var dropped: UInt64 = 0
            for frame in try Self.frames(socket.received) {
                if case .delivery = frame { delivered += 1 }
                if case .dropped(let notice) = frame { dropped += notice.count }
            }
            #expect(UInt64(delivered) + dropped == UInt64(perTopic) && dropped > 0, "\(delivered) delivered, \(dropped) dropped")
        }
        let after = try await publisher.stats()
        #expect(after["queued_bytes"] == 0, "what the write buffers held was counted off as it was taken: \(after)")
        await publisher.close()
        try await daemon.stop()
    }
}
