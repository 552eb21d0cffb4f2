import Foundation
import NIOCore
import NotifyBus
import Synchronization
import Testing

/// Fan-out and ordering through the real daemon, with the client library.
@Suite("Delivery through a real notifyd")
struct DeliveryTests {
    @Test("100 subscribers all receive the same messages in the same order")
    func hundredSubscribers() async throws {
        let daemon = try await TestDaemon.start()
        let subscribers = 100
        let messages = 500
        var clients: [NotifyClient] = []
        var subscriptions: [NotifySubscription] = []
        for index in 0..<subscribers {
            let client = try await daemon.client()
            clients.append(client)
            // Mixed patterns that all cover the topic: each connection still gets every message once.
            let pattern = ["fan.out", "fan.*", "fan.>", ">"][index % 4]
            subscriptions.append(try await client.subscribe(to: [TopicPattern(pattern)]))
        }
        let publisher = try await daemon.client()
        for index in 1...messages {
            try await publisher.publish("m\(index)", to: Topic("fan.out"))
        }
        try await publisher.flush()

        let expected = (1...messages).map { "m\($0)" }
        try await withThrowingTaskGroup(of: [String].self) { group in
            for subscription in subscriptions {
                group.addTask {
                    var received: [String] = []
                    for try await delivery in subscription.messages {
                        received.append(delivery.text!)
                        if received.count == messages { break }
                    }
                    return received
                }
            }
            for try await received in group {
                #expect(received == expected)
            }
        }
        let stats = try await publisher.stats()
        #expect(stats["messages_out"] == UInt64(subscribers * messages))
        for client in clients { await client.close() }
        await publisher.close()
        try await daemon.stop()
    }

    @Test("subscribe --latest while others publish: the buffered message, then live ones, no gap, no repeat")
    func latestFirstUnderConcurrentPublishers() async throws {
        let daemon = try await TestDaemon.start()
        let topic = try Topic("race.counter")
        let publishers = 3
        let perPublisher = 400
        let total = publishers * perPublisher
        let first = try await daemon.client()
        try await first.publishAcknowledged("start", to: topic)

        // Subscribers (the real CLI, JSON lines) join while the publishers run.
        let joined = Shared<[ChildProcess]>([])
        let publishing = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for publisher in 0..<publishers {
                    group.addTask {
                        let client = try await daemon.client()
                        for index in 0..<perPublisher {
                            try await client.publishAcknowledged("p\(publisher)-\(index)", to: topic)
                        }
                        await client.close()
                    }
                }
                group.addTask {
                    for _ in 0..<6 {
                        let subscriber = try startNotify(["subscribe", topic.name, "--latest", "--format", "json"], socket: daemon.socketPath)
                        joined.withLock { $0.append(subscriber) }
                        // Join the next one only once this one has its first message, spreading them over the run.
                        try await subscriber.standardOutput.wait("a subscriber's first message") { !$0.isEmpty }
                    }
                }
                try await group.waitForAll()
            }
        }
        try await publishing.value
        try await first.publishAcknowledged("end", to: topic)
        let lastSequence = UInt64(total + 2)

        for subscriber in joined.value {
            try await subscriber.standardOutput.wait("the final message") { $0.contains("\"payload\":\"end\"") }
            subscriber.signal(SIGTERM)
            let sequences = try subscriber.standardOutput.lines.map { line -> UInt64 in
                let object = try #require(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
                return try #require((object["seq"] as? NSNumber)?.uint64Value)
            }
            let start = try #require(sequences.first)
            #expect(sequences == Array(start...lastSequence), "consecutive from the buffered message to the end")
        }
        await first.close()
        try await daemon.stop()
    }

    @Test("a connection can ask not to receive its own publishes")
    func noEcho() async throws {
        let daemon = try await TestDaemon.start()
        let client = try await daemon.client()
        let other = try await daemon.client()
        let own = try await client.subscribe(to: [TopicPattern("echo.>")])
        let others = try await other.subscribe(to: [TopicPattern("echo.>")])
        try await client.setEcho(false)
        try await client.publishAcknowledged("mine", to: Topic("echo.a"))
        try await other.publishAcknowledged("theirs", to: Topic("echo.b"))
        var iterator = own.messages.makeAsyncIterator()
        #expect(try await iterator.next()?.text == "theirs", "its own message was skipped")
        var otherIterator = others.messages.makeAsyncIterator()
        #expect(try await otherIterator.next()?.text == "mine")
        await client.close()
        await other.close()
        try await daemon.stop()
    }

    @Test("the publisher's uid and pid come from the kernel")
    func peerCredentials() async throws {
        let daemon = try await TestDaemon.start()
        let client = try await daemon.client()
        let subscription = try await client.subscribe(to: [TopicPattern("who")])
        let sender = try startNotify(["send", "who", "me"], socket: daemon.socketPath)
        #expect(try await sender.exitStatus() == 0)
        var iterator = subscription.messages.makeAsyncIterator()
        let delivery = try #require(try await iterator.next())
        #expect(delivery.publisher.pid == sender.pid)
        #expect(delivery.publisher.uid == getuid())
        await client.close()
        try await daemon.stop()
    }
}
