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
        for try await delivery in subscription {
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

extension HostileInputTests {
    @Test("a subscriber that never reads is disconnected before it costs more than its bound; others get everything")
    func stalledSubscriber() async throws {
        let daemon = try await TestDaemon.start()
        let stalled = try RawSocket(path: daemon.socketPath)
        try stalled.send("SUB flood\nPING\n")
        #expect(await stalled.read { String(decoding: $0, as: UTF8.self).contains("PONG") })

        let listener = try await daemon.client()
        let subscription = try await listener.subscribe(to: [TopicPattern("flood")])
        let publisher = try await daemon.client()
        let payload = ByteBuffer(repeating: UInt8(ascii: "f"), count: 1 << 20)
        let messages = 100  // 100 MiB: past the 64 MiB bound plus what the kernel buffers
        // In step with the reading subscriber, so that only the stalled one falls behind.
        var received = 0
        var deliveries = subscription.makeAsyncIterator()
        for _ in 0..<messages {
            try await publisher.publish(payload, to: Topic("flood"), retain: false)
            let delivery = try await deliveries.next()
            #expect(delivery?.payload.readableBytes == 1 << 20)
            received += 1
        }
        try await publisher.flush()
        #expect(received == messages, "the reading subscriber got every message")
        #expect(daemon.log.contains("closing a connection that stopped reading"))
        let stats = try await publisher.stats()
        #expect(stats["connections"] == 2, "the stalled connection is gone; the listener and publisher remain")
        await listener.close()
        await publisher.close()
        try await daemon.stop()
    }
}
