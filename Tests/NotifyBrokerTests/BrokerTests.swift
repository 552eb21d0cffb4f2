import NIOCore
import Testing

@testable import NotifyBus
@testable import NotifyBroker
@testable import NotifyProtocol

@Suite("Broker (no socket)", .timeLimit(.minutes(3)))
struct BrokerTests {
    @Test("a new connection is greeted with the version and limits")
    func greeting() throws {
        let harness = BrokerHarness()
        let client = harness.connect()
        #expect(try client.transport.frames() == [.hello(ServerGreeting(limits: .default))])
        #expect(client.transport.flushes == 1)
    }

    @Test("a publish reaches every matching subscriber with its sequence, time and the kernel's identity")
    func publishSubscribe() throws {
        let harness = BrokerHarness()
        let subscriber = harness.connect(uid: 1, pid: 10)
        let publisher = harness.connect(uid: 1000, pid: 4242)
        subscriber.send("SUB backup.>\n")
        #expect(try subscriber.received() == [.ok(requestID: nil, value: nil)])

        publisher.send("PUB backup.nightly 4\ndone\nPUB backup.nightly 3\nnew\nPUB other 1\nx\n")
        let frames = try subscriber.received().compactMap(delivery)
        #expect(frames.map(\.topic.name) == ["backup.nightly", "backup.nightly"])
        #expect(frames.map(\.sequence) == [1, 2])
        #expect(frames.map(\.text) == ["done", "new"])
        #expect(frames.map(\.publisher) == [Publisher(uid: 1000, pid: 4242), Publisher(uid: 1000, pid: 4242)])
        #expect(frames[0].time == frames[1].time, "one batch, one reading of the clock")
        #expect(try publisher.received() == [], "no acknowledgement was asked for")

        publisher.send("PUB backup.nightly 5\nlater\n")
        let later = try subscriber.received().compactMap(delivery)
        #expect(later.map(\.sequence) == [3])
        #expect(later.map(\.time) == [PublishTime(microsecondsSinceEpoch: harness.now)], "the next batch reads the clock again")
        #expect(later[0].time > frames[1].time)
    }

    @Test("publishes held back by a connection closed in a flush take that flush's time; the next batch reads the clock again")
    func heldBackPublishesAtClose() throws {
        var configuration = BrokerConfiguration.default
        configuration.maxQueuedMessages = 1
        let harness = BrokerHarness(configuration: configuration)
        let watcher = harness.connect()
        watcher.send("SUB >\n")
        let slow = harness.connect()
        slow.send("SUB t overflow=disconnect\n")
        _ = try slow.received()
        slow.transport.isWritable = false
        slow.send("PUB held 4\nheld\n")
        #expect(slow.session.isHoldingBack, "its connection takes nothing: its publish waits")
        let publisher = harness.connect()
        publisher.send("PUB t 1\na\nPUB t 1\nb\nPUB t 1\nc\n")
        #expect(slow.transport.aborted, "it fell behind under overflow=disconnect")
        harness.now += 1_000
        publisher.send("PUB later 5\nlater\n")
        let deliveries = try watcher.received().compactMap(delivery)
        #expect(deliveries.map(\.text) == ["a", "b", "c", "held", "later"], "what it held back was published as it closed")
        #expect(deliveries.last?.time == PublishTime(microsecondsSinceEpoch: harness.now), "a batch of its own, a time of its own")
    }

    @Test("patterns with * and >, and reserved topics out of reach of leading wildcards")
    func patterns() throws {
        let harness = BrokerHarness()
        let star = harness.connect()
        let rest = harness.connect()
        let all = harness.connect()
        let daemon = harness.connect()
        star.send("SUB a.*.c\n")
        rest.send("SUB a.>\n")
        all.send("SUB >\n")
        daemon.send("SUB $notifyd.>\n")
        for client in [star, rest, all, daemon] { _ = try client.received() }
        let publisher = harness.connect()
        publisher.send("PUB a.b.c 1\n1\nPUB a.b 1\n2\nPUB a 1\n3\nPUB a.b.c.d 1\n4\n")
        #expect(try star.deliveries() == ["1"])
        #expect(try rest.deliveries() == ["1", "2", "4"])
        #expect(try all.deliveries() == ["1", "2", "3", "4"])
        #expect(try daemon.deliveries() == [])
    }

    @Test("a connection gets a message once, however many of its patterns match")
    func once() throws {
        let harness = BrokerHarness()
        let first = harness.connect()
        let second = harness.connect()
        first.send("SUB a.b\nSUB a.*\nSUB a.>\nSUB >\n")
        second.send("SUB a.b\n")
        _ = try first.received()
        _ = try second.received()
        harness.connect().send("PUB a.b 2\nhi\n")
        #expect(try first.deliveries() == ["hi"])
        #expect(try second.deliveries() == ["hi"])
    }

    @Test("a batch's deliveries are encoded once: each subscriber gets one write of the same bytes")
    func sharedBatch() throws {
        let harness = BrokerHarness()
        let first = harness.connect()
        let second = harness.connect()
        first.send("SUB a.>\n")
        second.send("SUB a.b\n")
        let writesBefore = (first.transport.written.count, second.transport.written.count)
        let payload = String(repeating: "p", count: 128)
        harness.connect().send(String(repeating: "PUB a.b 128\n\(payload)\n", count: 200))
        #expect(first.transport.written.count == writesBefore.0 + 1, "200 deliveries, one write")
        #expect(second.transport.written.count == writesBefore.1 + 1)
        let firstFrames = first.transport.written.last!
        let secondFrames = second.transport.written.last!
        let sameStorage = firstFrames.withUnsafeReadableBytes { a in secondFrames.withUnsafeReadableBytes { b in a.baseAddress == b.baseAddress } }
        #expect(sameStorage, "the same bytes go to every subscriber")
        #expect(try first.deliveries() == Array(repeating: payload, count: 200))
        #expect(try second.deliveries() == Array(repeating: payload, count: 200))
    }

    @Test("deliveries and replies to one connection keep their order within a batch")
    func orderWithinBatch() throws {
        let harness = BrokerHarness()
        let client = harness.connect()
        client.send("SUB t\n")
        _ = try client.received()
        client.send("PUB t 1\na\nPUB t 1\nb\n#1 PING\nPUB t 1\nc\n#2 PUB t 1 ack\nd\n")
        let frames = try client.received().map { frame -> String in
            switch frame {
            case .delivery(let delivery): delivery.text ?? "?"
            case .pong(let id): "PONG \(id ?? 0)"
            case .ok(let id, let value): "OK \(id ?? 0) \(value ?? 0)"
            default: "\(frame)"
            }
        }
        #expect(frames == ["a", "b", "PONG 1", "c", "d", "OK 2 4"])
    }

    @Test("a subscriber disconnected in the middle of a publish is closed after it, and the others' deliveries stay whole")
    func disconnectDuringPublish() throws {
        var configuration = BrokerConfiguration.default
        configuration.maxQueuedMessages = 2
        let harness = BrokerHarness(configuration: configuration)
        let slow = harness.connect()
        slow.send("SUB t overflow=disconnect\n")
        let other = harness.connect()
        other.send("SUB *\n")  // matched after exact names: delivered to after the slow one is disconnected
        _ = try other.received()
        slow.transport.isWritable = false
        slow.transport.onAbort = { [unowned harness] in
            harness.broker.close(slow.session)
            harness.broker.flush()
        }
        let publisher = harness.connect()
        publisher.send((1...5).map { "PUB t 1\n\($0)\n" }.joined())
        publisher.send((6...9).map { "PUB t 1\n\($0)\n" }.joined())
        #expect(slow.transport.aborted)
        #expect(try other.deliveries() == (1...9).map(String.init))
    }

    @Test("a delivery much smaller than its batch is copied out, so it does not keep the batch's memory alive")
    func smallDeliveryCopied() throws {
        let harness = BrokerHarness()
        let subscriber = harness.connect()
        subscriber.send("SUB t\n")
        harness.connect().send("PUB t 2\nhi\n")
        let written = subscriber.transport.written.last!
        #expect(written.capacity < 1024, "a \(written.readableBytes)-byte delivery holds \(written.capacity) bytes")
        #expect(try subscriber.deliveries() == ["hi"])
    }

    @Test("one flush per connection per batch, however many deliveries")
    func oneFlushPerBatch() throws {
        let harness = BrokerHarness()
        let subscriber = harness.connect()
        subscriber.send("SUB t\n")
        let before = subscriber.transport.flushes
        harness.connect().send(String(repeating: "PUB t 1\nx\n", count: 100))
        #expect(try subscriber.deliveries().count == 100)
        #expect(subscriber.transport.flushes == before + 1)
    }

    @Test("the latest message is buffered unless noretain; LATEST reads it, CLEAR forgets it and keeps the sequence")
    func latestAndClear() throws {
        let harness = BrokerHarness()
        let client = harness.connect()
        client.send("#1 LATEST t\n")
        #expect(try client.received().map(errorCode) == [.notFound])

        client.send("PUB t 3\none\nPUB t 3 noretain\ntwo\n#2 LATEST t\n")
        guard case .latest(let id, let last) = try client.received().first else { Issue.record("no LAST"); return }
        #expect(id == 2 && last.text == "one" && last.sequence == 1)

        client.send("#3 CLEAR t\n#4 LATEST t\n#5 CLEAR t\n")
        let frames = try client.received()
        #expect(frames.first == .ok(requestID: 3, value: nil))
        #expect(frames.dropFirst().first.flatMap(errorCode) == .notFound)
        #expect(frames.last == .ok(requestID: 5, value: nil), "clearing an empty topic is not an error")

        client.send("PUB t 5 ack\nthree\n")
        #expect(try client.received() == [.ok(requestID: nil, value: 3)], "the sequence continues after CLEAR")
    }

    @Test("SUB latest delivers each matching buffered message, then OK, then live ones, with no gap")
    func latestFirst() throws {
        let harness = BrokerHarness()
        let publisher = harness.connect()
        publisher.send("PUB s.a 2\na1\nPUB s.b 2\nb1\nPUB s.b 2 noretain\nb2\nPUB x 1\nx\n")
        let subscriber = harness.connect()
        subscriber.send("#7 SUB s.* latest\n")
        let frames = try subscriber.received()
        #expect(frames.last == .ok(requestID: 7, value: nil))
        // As LAST frames with the SUB's id: replies to it, not live messages for every subscription.
        let replayed = frames.compactMap { frame -> String? in
            guard case .latest(7?, let buffered) = frame else { return nil }
            return "\(buffered.topic.name)#\(buffered.sequence)=\(buffered.text!)"
        }
        #expect(frames.count == 3)
        #expect(replayed.sorted() == ["s.a#1=a1", "s.b#1=b1"], "the buffered message, which b2 (noretain) did not replace")
        publisher.send("PUB s.a 2\na2\n")
        #expect(try subscriber.received().compactMap(delivery).map(\.sequence) == [2])
    }

    @Test("a connection may stop receiving its own publishes")
    func noEcho() throws {
        let harness = BrokerHarness()
        let client = harness.connect()
        client.send("SUB t\nPUB t 1\na\n")
        #expect(try client.deliveries() == ["a"])
        client.send("#1 OPT noecho\nPUB t 1\nb\n")
        #expect(try client.received() == [.ok(requestID: 1, value: nil)])
        client.send("OPT echo\nPUB t 1\nc\n")
        #expect(try client.deliveries() == ["c"])
    }

    @Test("publishing to a reserved $ topic is not permitted; subscribing to one is")
    func reserved() throws {
        let harness = BrokerHarness()
        let client = harness.connect()
        client.send("#9 PUB $notifyd.x 1\nx\nSUB $notifyd.>\n")
        let frames = try client.received()
        guard case .error(let error) = frames.first else { Issue.record("expected ERR"); return }
        #expect(error.code == .notPermitted && error.requestID == 9)
        #expect(frames.last == .ok(requestID: nil, value: nil))
        #expect(harness.broker.statistics.topics == 0, "a refused publish leaves no trace")
    }

    @Test("UNSUB stops deliveries; UNSUB of something not subscribed is not-found")
    func unsubscribe() throws {
        let harness = BrokerHarness()
        let client = harness.connect()
        client.send("SUB a.>\nUNSUB a.>\n#2 UNSUB a.>\n")
        let frames = try client.received()
        #expect(frames.count == 3 && frames[2].flatMapError == .notFound)
        harness.connect().send("PUB a.b 1\nx\n")
        #expect(try client.deliveries() == [])
        #expect(harness.broker.statistics.subscriptions == 0)
    }

    @Test("a closed connection's subscriptions end and nothing more is written to it")
    func closeConnection() throws {
        let harness = BrokerHarness()
        let client = harness.connect()
        client.send("SUB a\nSUB b.>\n")
        #expect(harness.broker.statistics.subscriptions == 2)
        #expect(harness.broker.statistics.connections == 1)
        harness.broker.close(client.session)
        #expect(harness.broker.statistics.subscriptions == 0)
        #expect(harness.broker.statistics.connections == 0)
        let writes = client.transport.written.count
        harness.connect().send("PUB a 1\nx\n")
        #expect(client.transport.written.count == writes)
    }

    @Test("a closed subscriber is not kept alive by the subscriber lists of topics it listened to")
    func closedSessionsAreReleased() throws {
        let harness = BrokerHarness()
        weak var literalSession: Session?
        weak var wildcardSession: Session?
        weak var wildcardTransport: RecordingTransport?
        do {
            let literal = harness.connect()
            let wildcard = harness.connect()
            literal.send("SUB job.42.done\n")
            wildcard.send("SUB job.*.done\n")
            harness.connect().send("PUB job.42.done 2\nok\n")  // builds the topic's subscriber list
            #expect(try literal.deliveries() == ["ok"] && wildcard.deliveries() == ["ok"])
            literalSession = literal.session
            wildcardSession = wildcard.session
            wildcardTransport = wildcard.transport
            harness.broker.close(literal.session)
            harness.broker.close(wildcard.session)
        }
        #expect(literalSession == nil, "leaving a literal subscription empties that topic's list at once")
        #expect(wildcardTransport == nil, "a closed session lets go of its connection even while a stale list holds it")
        harness.connect().send("PUB job.42.done 2\nok\n")
        #expect(wildcardSession == nil, "the next publish rebuilds the list without it")
    }

    @Test("a frame error that loses framing is answered, then the connection is closed after the flush")
    func fatalError() throws {
        let harness = BrokerHarness()
        let client = harness.connect()
        client.send("PUB a 2\nabc\nPING\n")
        #expect(try client.received().map(errorCode) == [.malformed])
        #expect(client.transport.closed)
        #expect(harness.broker.statistics.connections == 0)
    }

    @Test("the subscription limit per connection is enforced")
    func subscriptionLimit() throws {
        var configuration = BrokerConfiguration.default
        configuration.maxSubscriptionsPerConnection = 2
        let harness = BrokerHarness(configuration: configuration)
        let client = harness.connect()
        client.send("SUB a\nSUB b\nSUB a\n#3 SUB c\n")
        let frames = try client.received()
        #expect(frames.count == 4)
        #expect(frames[3].flatMapError == .limitReached)
        let other = harness.connect()
        other.send("SUB c\n")
        #expect(try other.received() == [.ok(requestID: nil, value: nil)], "another connection is not affected")
    }

    @Test("past maxTopics, topics without a buffered message are forgotten, oldest first; buffered ones never")
    func topicLimit() throws {
        var configuration = BrokerConfiguration.default
        configuration.maxTopics = 3
        let harness = BrokerHarness(configuration: configuration)
        let client = harness.connect()
        client.send("PUB r1 1\nx\nPUB n1 1 noretain\nx\nPUB n2 1 noretain\nx\nPUB n3 1 noretain\nx\n")
        #expect(try client.received() == [])
        #expect(harness.broker.statistics.topics == 3)
        client.send("TOPICS\n")
        guard case .topics(_, let infos) = try client.received().first else { Issue.record("no TOPICS"); return }
        #expect(infos.map(\.topic.name) == ["n2", "n3", "r1"])
        client.send("PUB r2 1\nx\nPUB r3 1\nx\n#1 PUB r4 1\nx\n")
        #expect(try client.received().map(errorCode) == [.limitReached])
        client.send("LATEST r1\n")
        #expect(try client.received().count == 1)
    }

    @Test("TOPICS lists topics with their counters; STATS counts what happened")
    func topicsAndStats() throws {
        let harness = BrokerHarness()
        let subscriber = harness.connect()
        subscriber.send("SUB m.>\n")
        let client = harness.connect()
        client.send("PUB m.a 3\nabc\nPUB m.a 2 noretain\nde\nPUB z 1\nx\n#4 TOPICS m.>\n#5 STATS\n")
        let frames = try client.received()
        guard case .topics(let id, let infos) = frames.first, case .stats(let statsID, let stats) = frames.last else {
            Issue.record("unexpected \(frames)")
            return
        }
        #expect(id == 4)
        #expect(infos.count == 1)
        #expect(infos[0].topic.name == "m.a" && infos[0].sequence == 2 && infos[0].retainedBytes == 3)
        #expect(infos[0].published == 2 && infos[0].delivered == 2)
        #expect(stats["connections"] == 2 && stats["subscriptions"] == 1 && stats["topics"] == 2)
        #expect(stats["retained"] == 2 && stats["retained_bytes"] == 4)
        #expect(stats["messages_in"] == 3 && stats["messages_out"] == 2)
        #expect(stats["bytes_in"] == 6 && stats["bytes_out"] == 5)
        #expect(stats["uptime_seconds"] != nil)
        #expect(statsID == 5, "the reply echoes the request's id")
    }

    @Test("shutdown sends every connection what it is owed, then ERR unavailable, then closes it")
    func shutdown() throws {
        let harness = BrokerHarness()
        let subscriber = harness.connect()
        subscriber.send("SUB t\n")
        _ = try subscriber.received()
        let idle = harness.connect()
        harness.connect().send("PUB t 4\nlast\n")
        harness.broker.shutdown()
        let frames = try subscriber.received()
        #expect(frames.compactMap(delivery).map(\.text) == ["last"])
        #expect(frames.last.flatMap(errorCode) == .unavailable)
        #expect(try idle.received().map(errorCode) == [.unavailable])
        #expect(subscriber.transport.closed && idle.transport.closed)
        #expect(harness.broker.statistics.connections == 0)
    }

    @Test("decoder errors are answered with their id and the connection keeps working")
    func recoverableErrors() throws {
        let harness = BrokerHarness()
        let client = harness.connect()
        client.send("#1 PUB a..b 1\nx\n#2 FROB\n#3 PING\n")
        let frames = try client.received()
        #expect(frames.count == 3)
        #expect(frames[0].flatMapError == .invalidTopic)
        #expect(frames[1].flatMapError == .unknownOperation)
        #expect(frames.map(\.requestID) == [1, 2, 3], "errors echo the id of the request they answer")
        #expect(frames[2] == .pong(requestID: 3))
    }
}

extension ServerFrame {
    var flatMapError: ErrorCode? { errorCode(self) }
}

extension BrokerTests {
    @Test("clears and refusals are reported as events, with who did it and what about")
    func events() throws {
        let harness = BrokerHarness()
        var events: [String] = []
        harness.broker.onEvent = { event in
            switch event {
            case .cleared(let topic, let peer): events.append("cleared \(topic) by \(peer.uid)")
            case .refused(let error, let subject, let peer): events.append("refused \(error.code) \(subject ?? "-") by \(peer.uid)")
            case .stateNotSaved(let problem, _): events.append("not saved \(problem)")
            case .stateSavedAgain: events.append("saved again")
            case .dropped(let count, let peer): events.append("dropped \(count) for \(peer.uid)")
            case .disconnectedSlowSubscriber(let peer, _): events.append("disconnected \(peer.uid)")
            }
        }
        let client = harness.connect(uid: 42)
        client.send("PUB t 1\nx\nCLEAR t\nCLEAR t\nPUB $x 1\nx\nFROB\n")
        #expect(events == ["cleared t by 42", "refused not-permitted $x by 42", "refused unknown-op - by 42"],
                "the second CLEAR erased nothing, so it is no event")
    }

    @Test("reconfigure changes the greeting of new connections and the limits from then on")
    func reconfigure() throws {
        let harness = BrokerHarness()
        let before = harness.connect()
        var configuration = BrokerConfiguration.default
        configuration.protocolLimits.maxPayload = 7
        configuration.maxSubscriptionsPerConnection = 1
        harness.broker.reconfigure(configuration)
        let after = harness.connect()
        #expect(try after.transport.frames() == [.hello(ServerGreeting(limits: configuration.protocolLimits))])
        before.send("SUB a\n#2 SUB b\n")
        #expect(try before.received().last.flatMap(errorCode) == .limitReached)
    }
}

extension BrokerTests {
    @Test("past maxConnections, a new connection gets ERR limit instead of the greeting and is closed; others carry on")
    func connectionLimit() throws {
        var configuration = BrokerConfiguration.default
        configuration.maxConnections = 2
        let harness = BrokerHarness(configuration: configuration)
        let first = harness.connect(uid: 1)
        let second = harness.connect(uid: 2)
        let third = harness.connect(uid: 3)
        let frames = try third.transport.frames()
        #expect(frames.count == 1 && frames.first.flatMap(errorCode) == .limitReached, "no greeting, just the refusal")
        #expect(third.transport.closed)
        #expect(harness.broker.statistics.connections == 2)
        first.send("#1 PING\n")
        #expect(try first.received() == [.pong(requestID: 1)])

        harness.broker.close(second.session)
        let fourth = harness.connect(uid: 3)
        #expect(try fourth.transport.frames() == [.hello(ServerGreeting(limits: .default))], "a closed connection frees its place")
    }

    @Test("past maxConnectionsPerUser, that uid is refused while other uids still connect")
    func connectionLimitPerUser() throws {
        var configuration = BrokerConfiguration.default
        configuration.maxConnectionsPerUser = 2
        let harness = BrokerHarness(configuration: configuration)
        let a1 = harness.connect(uid: 1000)
        _ = harness.connect(uid: 1000)
        let a3 = harness.connect(uid: 1000)
        guard case .error(let refusal)? = try a3.transport.frames().first else {
            Issue.record("the third connection of uid 1000 was not refused")
            return
        }
        #expect(refusal.code == .limitReached)
        #expect(refusal.message.contains("uid 1000") && refusal.message.contains("2 connections"))
        #expect(a3.transport.closed)
        let other = harness.connect(uid: 1001)
        #expect(try other.transport.frames() == [.hello(ServerGreeting(limits: .default))])
        harness.broker.close(a1.session)
        let again = harness.connect(uid: 1000)
        #expect(try again.transport.frames() == [.hello(ServerGreeting(limits: .default))])
    }

    @Test("past maxRetainedBytes, a retained publish is refused whole: not delivered, not buffered; noretain still goes")
    func retainedBytesLimit() throws {
        var configuration = BrokerConfiguration.default
        configuration.maxRetainedBytes = 10
        let harness = BrokerHarness(configuration: configuration)
        let subscriber = harness.connect()
        subscriber.send("SUB >\n")
        _ = try subscriber.received()
        let client = harness.connect()
        client.send("#1 PUB a 6 ack\n123456\n#2 PUB b 5 ack\n12345\n#3 PUB b 4 ack\n1234\n#4 PUB a 2 ack\n12\n#5 PUB b 8 ack\n12345678\n#6 PUB c 9 noretain ack\n123456789\n")
        let replies = try client.received()
        #expect(replies.map(errorCode) == [nil, .limitReached, nil, nil, nil, nil])
        #expect(replies[0] == .ok(requestID: 1, value: 1))
        #expect(replies[2] == .ok(requestID: 3, value: 1), "the refused publish took no sequence number")
        #expect(replies[3] == .ok(requestID: 4, value: 2), "replacing a buffered message counts only the difference")
        #expect(replies[4] == .ok(requestID: 5, value: 2))
        #expect(try subscriber.deliveries() == ["123456", "1234", "12", "12345678", "123456789"])
        #expect(harness.broker.statistics.retainedBytes == 10)
        client.send("#7 PUB c 1 ack\nx\n#8 CLEAR a\n#9 PUB c 1 ack\nx\n")
        #expect(try client.received().map(errorCode) == [.limitReached, nil, nil])
    }
}


extension BrokerTests {
    /// A subscriber to `t`, and a client whose connection takes nothing, which has sent `requests`.
    static func unwritableClient(sending requests: String) throws -> (BrokerHarness, BrokerHarness.Client, BrokerHarness.Client) {
        let harness = BrokerHarness()
        let subscriber = harness.connect()
        subscriber.send("SUB t\n")
        _ = try subscriber.received()
        let client = harness.connect()
        client.transport.isWritable = false
        client.send(requests)
        return (harness, subscriber, client)
    }

    @Test("requests from a connection that does not take its replies wait, and are carried out in order once it does")
    func holdBack() throws {
        let (harness, subscriber, client) = try Self.unwritableClient(sending: "#1 PING\nPUB t 1\na\n#2 TOPICS\nPUB t 1\nb\n")
        #expect(try client.received() == [], "nothing carried out, so no reply was made")
        #expect(try subscriber.deliveries() == [])
        #expect(client.session.isHoldingBack)

        client.transport.isWritable = true
        harness.broker.writabilityChanged(client.session)
        harness.broker.flush()
        let replies = try client.received()
        guard replies.count == 2, case .topics(2, let infos) = replies[1] else {
            Issue.record("expected PONG then TOPICS, got \(replies)")
            return
        }
        #expect(replies[0] == .pong(requestID: 1))
        #expect(infos.map(\.sequence) == [1], "TOPICS was carried out after the first publish and before the second")
        #expect(try subscriber.deliveries() == ["a", "b"])
        #expect(!client.session.isHoldingBack)
    }

    @Test("a connection that goes away with requests held back still publishes what it wrote; its questions are dropped")
    func heldBackPublishesOnClose() throws {
        let (harness, subscriber, client) = try Self.unwritableClient(sending: "PUB t 1\na\n#2 TOPICS\n#3 PUB t 1 ack\nb\nCLEAR t\n")
        let writtenBefore = client.transport.written.count
        harness.broker.close(client.session)
        harness.broker.flush()
        #expect(try subscriber.deliveries() == ["a", "b"])
        #expect(client.transport.written.count == writtenBefore, "nothing more is written to a connection that is gone")
        subscriber.send("LATEST t\n")
        #expect(try subscriber.received().map(errorCode) == [.notFound], "the CLEAR it sent was carried out too")
    }
}
