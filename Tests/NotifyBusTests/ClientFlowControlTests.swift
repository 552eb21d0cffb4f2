import NIOCore
import NIOEmbedded
import Testing

@testable import NotifyBus
@testable import NotifyProtocol

/// The client's side of backpressure, without a socket: a subscription that fills up pauses the daemon's deliveries,
/// stops the reading at its hard limit, reads on for a reply, and drops and announces what comes past its limit then.
@Suite("Client flow control (no socket)", .timeLimit(.minutes(3)))
struct ClientFlowControlTests {
    /// A client handler on an embedded channel, greeted with protocol `version`, with one subscription.
    final class Client {
        let channel = EmbeddedChannel()
        let handler: ClientChannelHandler
        let gauge: SubscriptionGauge
        let subscriber: LocalSubscriber
        let id: UInt64

        init(version: UInt64, limits: SubscriptionBufferLimits, pattern: String = "t") throws {
            handler = ClientChannelHandler(greeting: channel.eventLoop.makePromise(of: ServerGreeting.self))
            try channel.pipeline.syncOperations.addHandler(handler)
            try channel.writeInbound(ByteBuffer(string: "HELLO notifyd \(version) max_payload=1048576 max_topic=255 max_line=1024\n"))
            gauge = SubscriptionGauge(limits: limits)
            subscriber = try LocalSubscriber(pattern, gauge: gauge)
            id = handler.addSubscription(subscriber.local).id
        }

        /// Delivers messages `sequences` of `topic`, one read each.
        func deliver(_ sequences: ClosedRange<UInt64>, of topic: String = "t") throws {
            for sequence in sequences {
                try channel.writeInbound(ByteBuffer(string: "MSG \(topic) \(sequence) 1795305600000000 1000 1 - 1\nx\n"))
            }
        }

        /// The requests the client wrote since the last call, without their ids (once the event loop ran what was
        /// scheduled: publishes gathered in the outbox are written by a task of their own).
        func sent() throws -> [String] {
            channel.embeddedEventLoop.run()
            var lines: [String] = []
            while let buffer = try channel.readOutbound(as: ByteBuffer.self) {
                lines += String(buffer: buffer).split(separator: "\n").map { line in
                    line.hasPrefix("#") ? String(line.drop(while: { $0 != " " }).dropFirst()) : String(line)
                }
            }
            return lines
        }

        /// Plays a consumer that takes `count` events, telling the handler when it caught up, as the iterator does.
        func consume(_ count: Int) {
            let size = SubscriptionEvent.message(
                Delivery(topic: try! Topic("t"), sequence: 1, time: PublishTime(microsecondsSinceEpoch: 0),
                         publisher: Publisher(uid: 1000, pid: 1), payload: ByteBuffer(string: "x"))
            ).bufferedSize
            for _ in 0..<count where gauge.take(size) { handler.subscriptionCaughtUp(id) }
        }

        /// Everything handed to the consumer, in order (ends the subscription).
        func events() async throws -> [SubscriptionEvent] {
            try await subscriber.events()
        }
    }

    /// The reply `promise` got; on an embedded loop it is there as soon as the frame was read.
    static func answer(_ promise: EventLoopPromise<ServerFrame>) throws -> ServerFrame {
        try promise.futureResult.wait()
    }

    @Test("protocol 2: full at the high mark pauses the daemon and reads on; the hard limit stops reading; caught up resumes")
    func pausesThenResumes() throws {
        let client = try Client(version: 2, limits: SubscriptionBufferLimits(highEvents: 4, highBytes: 1 << 20))
        try client.deliver(1...3)
        #expect(try client.sent() == [] && client.handler.isReading)
        try client.deliver(4...4)
        #expect(try client.sent() == ["OPT pause"])
        #expect(client.handler.isReading, "it reads on: the daemon still sends replies")
        try client.deliver(5...8)
        #expect(!client.handler.isReading, "at twice the high mark it stops reading")
        client.consume(5)
        #expect(try client.sent() == [] && !client.handler.isReading, "above the low mark (2 events) it still holds back")
        client.consume(1)
        #expect(try client.sent() == ["OPT resume"])
        #expect(client.handler.isReading)
    }

    @Test("protocol 1: full at the high mark stops reading, except while a reply is awaited")
    func versionOneStopsReading() throws {
        let client = try Client(version: 1, limits: SubscriptionBufferLimits(highEvents: 4, highBytes: 1 << 20))
        try client.deliver(1...4)
        #expect(try client.sent() == [], "a version 1 daemon is never asked to pause")
        #expect(!client.handler.isReading)
        let reply = client.channel.eventLoop.makePromise(of: ServerFrame.self)
        client.handler.send(.ping, reply: reply, written: nil)
        #expect(try client.sent() == ["PING"])
        #expect(client.handler.isReading, "reading for the PONG")
        try client.channel.writeInbound(ByteBuffer(string: "#1 PONG\n"))
        #expect(try Self.answer(reply) == .pong(requestID: 1))
        #expect(!client.handler.isReading, "the reply is in: held back again")
    }

    @Test("at its hard limit with a reply awaited, it reads on and drops what comes, then announces it in its place")
    func dropsPastTheHardLimitForAReply() async throws {
        let client = try Client(version: 2, limits: SubscriptionBufferLimits(highEvents: 2, highBytes: 1 << 20))
        try client.deliver(1...4)
        #expect(!client.handler.isReading)
        let reply = client.channel.eventLoop.makePromise(of: ServerFrame.self)
        client.handler.send(.stats, reply: reply, written: nil)
        #expect(client.handler.isReading, "a consumer may be waiting for this reply: it must come")
        try client.deliver(5...7)
        try client.channel.writeInbound(ByteBuffer(string: "DROP t 3 8 10\n"))
        try client.deliver(11...11)
        try client.channel.writeInbound(ByteBuffer(string: "#2 STATS 0\n"))
        #expect(try Self.answer(reply) == .stats(requestID: 2, ServerStats(counters: [])))
        #expect(!client.handler.isReading)
        #expect(client.gauge.held.events == 4, "nothing was held past the hard limit")
        client.consume(3)
        try client.deliver(12...12)
        let events = try await client.events()
        let summary = events.map { event -> String in
            switch event {
            case .message(let delivery): return "\(delivery.sequence)"
            case .dropped(let notice): return "DROP \(notice.count) \(notice.firstSequence)-\(notice.lastSequence)"
            }
        }
        #expect(summary == ["1", "2", "3", "4", "DROP 7 5-11", "12"])
    }

    @Test("notices of what it dropped itself all come before the next message, even when they fill it to its limit")
    func noticesBeforeTheNextMessage() async throws {
        let client = try Client(version: 2, limits: SubscriptionBufferLimits(highEvents: 2, highBytes: 1 << 20), pattern: "*")
        try client.deliver(1...4)
        let reply = client.channel.eventLoop.makePromise(of: ServerFrame.self)
        client.handler.send(.stats, reply: reply, written: nil)
        try client.deliver(5...5)
        try client.deliver(1...1, of: "u")
        client.consume(1)
        try client.deliver(6...6)
        let summary = try await client.events().map { event -> String in
            switch event {
            case .message(let delivery): return "\(delivery.topic.name)#\(delivery.sequence)"
            case .dropped(let notice): return "DROP \(notice.topic.name) \(notice.firstSequence)-\(notice.lastSequence)"
            }
        }
        #expect(summary == ["t#1", "t#2", "t#3", "t#4", "DROP t 5-5", "DROP u 1-1", "t#6"])
        reply.fail(TestStop())
    }

    @Test("what it drops itself over more than 1,024 topics is told in 1,024 notices and one about the others")
    func localDropsStayBounded() {
        var drops = DropTally()
        for index in 1...2_000 {
            drops.record(try! Topic("t.\(index)"), count: 1, first: 1, last: 1)
        }
        let notices = drops.take()
        #expect(notices.count == DropTally.topicLimit + 1)
        #expect(notices.last?.isAboutManyTopics == true && notices.last?.count == 976)
        #expect(drops.isEmpty)
    }

    struct TestStop: Error {}
}
