import Testing

@testable import NotifyBus
@testable import NotifyBroker
@testable import NotifyProtocol

@Suite("Limits per user (broker, no socket)", .timeLimit(.minutes(3)))
struct UserLimitsTests {
    @Test("subscriptions are counted per uid over its connections; at the limit that uid is refused, others are not")
    func subscriptionsPerUser() throws {
        var configuration = BrokerConfiguration.default
        configuration.maxSubscriptionsPerUser = 3
        let harness = BrokerHarness(configuration: configuration)
        let first = harness.connect(uid: 1000)
        let second = harness.connect(uid: 1000)
        first.send("SUB a\nSUB b\n")
        second.send("SUB c\n#1 SUB d\n")
        #expect(try first.received() == [.ok(requestID: nil, value: nil), .ok(requestID: nil, value: nil)])
        let refused = try second.received()
        #expect(refused.map(errorCode) == [nil, .limitReached])
        guard case .error(let error) = refused.last else { return }
        #expect(error.message.hasPrefix("uid 1000 already holds 3 subscriptions over its connections (the limit per user)"))

        let other = harness.connect(uid: 1001)
        other.send("SUB d\n")
        #expect(try other.received().map(errorCode) == [nil], "another uid is not affected")

        second.send("UNSUB c\nSUB d\n")
        #expect(try second.received().map(errorCode) == [nil, nil], "an UNSUB makes room")
        harness.broker.close(first.session)
        second.send("SUB e\nSUB f\n")
        #expect(try second.received().map(errorCode) == [nil, nil], "a closed connection's subscriptions no longer count")
    }

    @Test("buffered bytes count against their publisher until replaced or cleared, by anyone; past the limit a retained publish is refused whole")
    func retainedBytesPerUser() throws {
        var configuration = BrokerConfiguration.default
        configuration.maxRetainedBytesPerUser = 10
        let harness = BrokerHarness(configuration: configuration)
        let reader = harness.connect(uid: 1002)
        reader.send("SUB >\n")
        _ = try reader.received()
        let alice = harness.connect(uid: 1000)
        let bob = harness.connect(uid: 1001)

        alice.send("#1 PUB a 6 ack\n123456\n#2 PUB b 6 ack\n123456\n")
        let replies = try alice.received()
        #expect(replies.first == .ok(requestID: 1, value: 1))
        #expect(replies.last.flatMap(errorCode) == .limitReached)
        guard case .error(let error) = replies.last else { return }
        #expect(error.message.hasPrefix("buffering this 6-byte message would take uid 1000 past 10 bytes"))
        #expect(try reader.deliveries() == ["123456"], "the refused publish was not delivered")

        alice.send("#3 PUB a 9 ack\n123456789\n#4 PUB b 3 noretain ack\nxyz\n")
        #expect(try alice.received().map(errorCode) == [nil, nil], "replacing its own message, and noretain, still go")
        bob.send("#5 PUB c 8 ack\n12345678\n")
        #expect(try bob.received().map(errorCode) == [nil], "another uid has its own allowance")

        bob.send("#6 PUB a 1 ack\nx\n")
        _ = try bob.received()
        alice.send("#7 PUB b 10 ack\n1234567890\n")
        #expect(try alice.received().map(errorCode) == [nil], "bob's message replaced alice's, which no longer counts against her")
        bob.send("#8 PUB d 2 ack\nxy\n")
        #expect(try bob.received().map(errorCode) == [.limitReached], "it counts against bob now: 8 + 1 + 2 > 10")
        alice.send("#9 CLEAR c\n")
        _ = try alice.received()
        bob.send("#10 PUB d 2 ack\nxy\n")
        #expect(try bob.received().map(errorCode) == [nil], "a clear, by anyone, frees the publisher's bytes")
    }

    @Test("after a restart, each buffered message still counts against the uid that published it")
    func restoredOwners() throws {
        let directory = StateLogTests.Directory()
        var configuration = BrokerConfiguration.default
        configuration.maxRetainedBytesPerUser = 10
        do {
            let harness = BrokerHarness(configuration: configuration)
            let (log, contents) = try StateLog.open(directory: directory.path)
            harness.broker.attach(log, restoring: contents)
            harness.connect(uid: 1000).send("PUB a 8\n12345678\n")
            try harness.broker.saveState()
        }
        let harness = BrokerHarness(configuration: configuration)
        let (log, contents) = try StateLog.open(directory: directory.path)
        harness.broker.attach(log, restoring: contents)
        let alice = harness.connect(uid: 1000)
        alice.send("#1 PUB b 3 ack\nxyz\n")
        #expect(try alice.received().map(errorCode) == [.limitReached], "8 restored + 3 > 10")
        let bob = harness.connect(uid: 1001)
        bob.send("#2 PUB b 3 ack\nxyz\n#3 CLEAR a\n")
        #expect(try bob.received().map(errorCode) == [nil, nil])
        alice.send("#4 PUB c 10 ack\n1234567890\n")
        #expect(try alice.received().map(errorCode) == [nil], "the cleared message no longer counts")
    }
}

/// Issue 14, "Pattern cost": each token of a wildcard pattern may cost a trie node; they are bounded per pattern and
/// per uid.
@Suite("Wildcard pattern tokens (broker, no socket)", .timeLimit(.minutes(3)))
struct WildcardTokensTests {
    @Test("a wildcard pattern has at most 32 tokens; one uid's wildcard tokens are bounded; plain names cost none")
    func tokens() throws {
        var configuration = BrokerConfiguration.default
        configuration.maxWildcardTokensPerUser = 100
        let harness = BrokerHarness(configuration: configuration)
        let client = harness.connect(uid: 1000)
        let long = (1...40).map { "t\($0)" }.joined(separator: ".")
        client.send("#1 SUB \(long).*\n#2 SUB \(long)\n")
        let first = try client.received()
        #expect(first.map(errorCode) == [.limitReached, nil], "41 tokens with a wildcard no; without one, a hash entry")
        guard case .error(let error) = first.first else { return }
        #expect(error.message.hasPrefix("a pattern with a wildcard may have at most 32 tokens, and this one has 41"))

        // 30 tokens each: three fit in 100, the fourth does not, until one goes.
        let patterns = (1...4).map { index in (1...29).map { "p\(index)x\($0)" }.joined(separator: ".") + ".>" }
        client.send(patterns.enumerated().map { "#\($0.offset + 3) SUB \($0.element)\n" }.joined())
        #expect(try client.received().map(errorCode) == [nil, nil, nil, .limitReached])
        harness.connect(uid: 1001).send("SUB \(patterns[3])\n")
        client.send("UNSUB \(patterns[0])\nSUB \(patterns[3])\n")
        #expect(try client.received().map(errorCode) == [nil, nil], "an UNSUB gives its tokens back")
        harness.broker.close(client.session)
        let again = harness.connect(uid: 1000)
        again.send(patterns.prefix(3).map { "SUB \($0)\n" }.joined())
        #expect(try again.received().map(errorCode) == [nil, nil, nil], "a closed connection gives its tokens back")
    }
}
