import Foundation
import NIOCore
import NotifyBus
import Synchronization
import Testing

/// Fan-out and ordering through the real daemon, with the client library.
@Suite("Delivery through a real notifyd", .timeLimit(.minutes(10)))
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
                    try await deliveries(of: subscription, waitingFor: "\(messages) messages") { $0.count == messages }.map { $0.text ?? "" }
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

    @Test(
        "subscribe --latest while others publish: the buffered message, then live ones, no gap, no repeat",
        arguments: [["race.counter"], ["race.>", "race.counter", "race.*"]]  // the second: overlapping patterns
    )
    func latestFirstUnderConcurrentPublishers(patterns: [String]) async throws {
        let daemon = try await TestDaemon.start()
        let topic = try Topic("race.counter")
        let publishers = 3
        // Each publisher keeps going until every subscriber has joined, then sends this many more: so every
        // subscriber joins while messages are still being published, however fast or slow this machine is.
        let afterLastJoin = 100
        let first = try await daemon.client()
        try await first.publishAcknowledged("start", to: topic)

        // Subscribers (the real CLI, JSON lines) join while the publishers run.
        let joined = Shared<[ChildProcess]>([])
        let allJoined = Shared(false)
        let published = Shared(0)
        let publishing = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for publisher in 0..<publishers {
                    group.addTask {
                        let client = try await daemon.client()
                        var index = 0
                        var remaining = afterLastJoin
                        while remaining > 0 {
                            try await client.publishAcknowledged("p\(publisher)-\(index)", to: topic)
                            index += 1
                            if allJoined.value { remaining -= 1 }
                        }
                        published.withLock { $0 += index }
                        await client.close()
                    }
                }
                group.addTask {
                    for _ in 0..<6 {
                        let subscriber = try startNotify(["subscribe"] + patterns + ["--latest", "--format", "json"], socket: daemon.socketPath)
                        joined.withLock { $0.append(subscriber) }
                        // Join the next one only once this one has its first message, spreading them over the run.
                        try await subscriber.standardOutput.wait("a subscriber's first message") { !$0.isEmpty }
                    }
                    allJoined.withLock { $0 = true }
                }
                try await group.waitForAll()
            }
        }
        try await publishing.value
        try await first.publishAcknowledged("end", to: topic)
        let total = published.value
        let lastSequence = UInt64(total + 2)

        for subscriber in joined.value {
            try await subscriber.standardOutput.wait("the final message") { $0.contains("\"payload\":\"end\"") }
            subscriber.signal(SIGTERM)
            let sequences = try subscriber.standardOutput.lines.map { line -> UInt64 in
                let object = try #require(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
                return try #require((object["seq"] as? NSNumber)?.uint64Value)
            }
            let start = try #require(sequences.first)
            // At most one publish per publisher was in flight when the last one joined.
            #expect(start <= UInt64(total + 1 - publishers * (afterLastJoin - 1)), "joined while the publishers were running")
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
        let iterator = TimedMessages(own)
        #expect(try await iterator.next(waitingFor: "the next message on own")?.text == "theirs", "its own message was skipped")
        let otherIterator = TimedMessages(others)
        #expect(try await otherIterator.next(waitingFor: "the next message on others")?.text == "mine")
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
        let iterator = TimedMessages(subscription)
        let delivery = try #require(try await iterator.next(waitingFor: "the next message on own"))
        #expect(delivery.publisher.pid == sender.pid)
        #expect(delivery.publisher.uid == getuid())
        await client.close()
        try await daemon.stop()
    }

    @Test("a client's subscriptions never see a message twice: a later subscribe with latestFirst replays only to itself")
    func laterLatestFirstSubscription() async throws {
        let daemon = try await TestDaemon.start()
        let client = try await daemon.client()
        let publisher = try await daemon.client()
        try await publisher.publishAcknowledged("1", to: Topic("two.subs"))
        let broad = try await client.subscribe(to: [TopicPattern("two.>")])
        try await publisher.publishAcknowledged("2", to: Topic("two.subs"))
        // The daemon sends the buffered message (2) again for this one; the broad subscription has it already.
        let narrow = try await client.subscribe(to: [TopicPattern("two.subs"), TopicPattern("two.*")], latestFirst: true)
        try await publisher.publishAcknowledged("3", to: Topic("two.subs"))
        try await publisher.publishAcknowledged("end", to: Topic("two.end"))

        let broadSeen = try await deliveries(of: broad, waitingFor: "two.end on the broad subscription") { $0.last?.topic.name == "two.end" }
            .map { $0.text ?? "" }
        #expect(broadSeen == ["2", "3", "end"])
        let narrowSeen = try await deliveries(of: narrow, waitingFor: "two.end on the narrow subscription") { $0.last?.topic.name == "two.end" }
            .map { $0.text ?? "" }
        #expect(narrowSeen == ["2", "3", "end"], "the buffered message once, though two of its patterns match")
        await client.close()
        await publisher.close()
        try await daemon.stop()
    }

    @Test("the async client: the README's example, fire-and-forget and acknowledged publishes, latest, clear, topics, stats")
    func asyncClient() async throws {
        let daemon = try await TestDaemon.start()
        let client = try await NotifyClient.connect(to: daemon.socketPath)
        #expect(try await client.publishAcknowledged("done", to: Topic("backup.status")) == 1)

        // The README's example, as written there (but stopping after two messages).
        let seen = try await withDeadline(.seconds(30), waitingFor: "two messages of backup.>") {
            var seen: [String] = []
            for try await delivery in try await client.subscribe(to: [TopicPattern("backup.>")], latestFirst: true).messages {
                seen.append("\(delivery.topic) \(delivery.sequence) \(delivery.text ?? "<binary>")")
                if seen.count == 1 { try await client.publish("again", to: Topic("backup.status")) }
                if seen.count == 2 { break }
            }
            return seen
        }
        #expect(seen == ["backup.status 1 done", "backup.status 2 again"])

        try await client.publish(ByteBuffer(bytes: [0, 0xFF]), to: Topic("backup.blob"), retain: false)
        try await client.flush()
        let latest = try #require(try await client.latest(Topic("backup.status")))
        #expect(latest.text == "again" && latest.sequence == 2 && latest.publisher.uid == getuid())
        #expect(try await client.latest(Topic("backup.blob")) == nil, "sent without retain: nothing buffered")
        #expect(try await client.latest(Topic("never.published")) == nil)

        try await client.clear(Topic("backup.status"))
        #expect(try await client.latest(Topic("backup.status")) == nil)
        let topics = try await client.topics(matching: TopicPattern("backup.*"))
        #expect(topics.map(\.topic.name).sorted() == ["backup.blob", "backup.status"])
        let status = try #require(topics.first { $0.topic.name == "backup.status" })
        #expect(status.sequence == 2 && status.retainedBytes == nil && status.published == 2 && status.delivered == 2)
        #expect(try await client.topics(matching: TopicPattern("nothing.>")).isEmpty)

        let stats = try await client.stats()
        #expect(stats["messages_in"] == 3)
        #expect(stats["connections"] == 1)
        #expect(stats["topics"] == 2)
        await client.close()
        try await daemon.stop()
    }
}
