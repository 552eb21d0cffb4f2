import Foundation
import NIOCore
import NotifyBus
import Testing

/// Bad input sent raw on the socket: each gets its documented error, and everyone else is served as before.
@Suite("Bad input on a real notifyd")
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
        let cases: [(input: String, code: String, then: Then)] = [
            ("FROB\n", "ERR unknown-op", .answersPing),
            ("PUB good\n", "ERR malformed", .answersPing),
            ("PUB a..b 1\nx\n", "ERR invalid-topic", .answersPing),
            ("PUB good.* 1\nx\n", "ERR invalid-topic", .answersPing),
            ("SUB a.>.b\n", "ERR invalid-topic", .answersPing),
            ("PUB good 5000\n" + String(repeating: "z", count: 5000) + "\n", "ERR too-large", .answersPing),
            ("PUB good 2147483648\n" + String(repeating: "z", count: 100_000), "ERR too-large", .skipsPayload),
            ("PUB $notifyd.x 1\nx\n", "ERR not-permitted", .answersPing),
            ("UNSUB never\n", "ERR not-found", .answersPing),
            ("PUB good 2\nabcd\n", "ERR malformed", .closes),
            (String(repeating: "J", count: 5000), "ERR malformed", .closes),
        ]
        for bad in cases {
            try await publishGood()
            let raw = try RawSocket(path: daemon.socketPath)
            try raw.send(bad.input)
            if bad.then == .answersPing { try raw.send("PING\n") }
            let expectedEnd = bad.then == .answersPing ? "PONG" : bad.code
            #expect(await raw.read { String(decoding: $0, as: UTF8.self).contains(expectedEnd) }, "\(bad.input.prefix(40)): got \(raw.lines)")
            #expect(raw.lines.dropFirst().first?.hasPrefix(bad.code) == true, "\(bad.input.prefix(40)): got \(raw.lines)")
            if bad.then == .closes {
                #expect(await raw.isClosedByPeer(), "framing was lost, so the daemon closes")
            }
            try await publishGood()
        }

        // A client that vanishes mid-frame, and one that connects and never speaks.
        do {
            let vanishing = try RawSocket(path: daemon.socketPath)
            try vanishing.send("PUB good 100\nonly part of it")
        }
        let silent = try RawSocket(path: daemon.socketPath)
        try await publishGood()

        var received: [String] = []
        for try await delivery in subscription.messages {
            received.append(delivery.text!)
            if received.count == sent { break }
        }
        #expect(received == (1...sent).map { "g\($0)" }, "the listener got every good message and nothing else")
        let stats = try await listener.stats()
        #expect(stats["messages_in"] == UInt64(sent))
        _ = silent
        await listener.close()
        await publisher.close()
        #expect(try await daemon.stop() == 0)
    }
}

/// Subscribers that do not keep up, through the real daemon.
@Suite("Slow subscribers on a real notifyd")
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
        var deliveries = listener.messages.makeAsyncIterator()
        let step = 2_000
        for start in stride(from: 0, to: count, by: step) {
            for index in start..<min(start + step, count) {
                try await publisher.publish("m\(index)", to: topic, retain: false)
            }
            for _ in start..<min(start + step, count) {
                let delivery = try #require(try await deliveries.next())
                sequences.append(delivery.sequence)
            }
        }
        return sequences
    }

    @Test("a subscriber that never reads: another gets all 100,000 messages, and its own deliveries and drops add up")
    func neverReads() async throws {
        let daemon = try await TestDaemon.start()
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
        var droppedRanges: [ClosedRange<UInt64>] = []
        for frame in frames {
            switch frame {
            case .delivery(let delivery): delivered.append(delivery.sequence)
            case .dropped(let notice):
                droppedCount += notice.count
                droppedRanges.append(notice.firstSequence...notice.lastSequence)
            default: break
            }
        }
        #expect(droppedCount > 0, "it fell behind, so messages were dropped")
        #expect(UInt64(delivered.count) + droppedCount == UInt64(total), "delivered + dropped = published")
        #expect(delivered == delivered.sorted(), "what it got is in order")
        #expect(!delivered.contains { sequence in droppedRanges.contains { $0.contains(sequence) } } || droppedRanges.count > 1,
                "a single drop range holds nothing that was delivered")
        let stats = try await publisher.stats()
        #expect(stats["dropped"] == droppedCount)
        #expect(stats["connections"] == 3, "the stalled subscriber was not disconnected (drop-oldest)")
        await listener.close()
        await publisher.close()
        try await daemon.stop()
    }

    @Test("overflow=disconnect closes a subscriber that falls behind; others are not affected")
    func disconnectPolicy() async throws {
        let daemon = try await TestDaemon.start(arguments: ["--max-queued-messages", "100"])
        let stalled = try RawSocket(path: daemon.socketPath)
        try stalled.send("SUB flood overflow=disconnect\nPING\n")
        #expect(await stalled.read { String(decoding: $0, as: UTF8.self).contains("PONG") })
        let listener = try await daemon.client()
        let publisher = try await daemon.client()
        let subscription = try await listener.subscribe(to: [TopicPattern("flood")])
        let payload = ByteBuffer(repeating: UInt8(ascii: "x"), count: 16 << 10)
        var deliveries = subscription.messages.makeAsyncIterator()
        // 16 KiB messages: the kernel's and NIO's buffers fill within a few hundred, then its queue of 100.
        for _ in 0..<2_000 {
            try await publisher.publish(payload, to: Topic("flood"), retain: false)
            _ = try #require(try await deliveries.next())
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
        let daemon = try await TestDaemon.start(arguments: ["--max-queued-messages", "50"])
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
}
