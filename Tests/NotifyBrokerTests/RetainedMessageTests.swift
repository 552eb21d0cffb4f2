import NIOCore
import Testing

@testable import NotifyBus
@testable import NotifyBroker
@testable import NotifyProtocol

/// A topic's buffered message: one block per topic, replaced in place while the messages keep their size (a topic
/// without history; with one, see ``SharedRetainedMessageTests``).
@Suite("Buffered message block", .timeLimit(.minutes(3)))
struct RetainedMessageTests {
    static var withoutHistory: BrokerConfiguration {
        var configuration = BrokerConfiguration.default
        configuration.history = .off
        return configuration
    }

    @Test("a topic republished with messages of about the same size keeps its block; LATEST and SUB … latest answer the newest")
    func keepsItsBlock() throws {
        let harness = BrokerHarness(configuration: Self.withoutHistory)
        let publisher = harness.connect()
        publisher.send("PUB t 5\nfirst\n")
        let block = try #require(harness.broker.topicTable["t"]?.retainedBlock)
        for index in 2...100 { publisher.send("PUB t 5\nm\(1_000 + index)\n") }
        let after = try #require(harness.broker.topicTable["t"]?.retainedBlock)
        #expect(after === block, "replaced in place, no allocation per publish")
        #expect(after.sequence == 100)
        #expect(after.payloadSize == 5)

        let reader = harness.connect()
        reader.send("#1 LATEST t\n#2 SUB t latest\n")
        let frames = try reader.received()
        guard frames.count == 3, case .latest(1, let last) = frames[0], case .latest(2, let replayed) = frames[1] else {
            Issue.record("expected two LAST frames and an OK, got \(frames)")
            return
        }
        #expect(last.text == "m1100" && last.sequence == 100)
        #expect(replayed.text == "m1100" && replayed.sequence == 100)
    }

    @Test("a much larger or much smaller message gets a block of its size; the counts follow the message")
    func resizes() throws {
        let harness = BrokerHarness(configuration: Self.withoutHistory)
        let publisher = harness.connect()
        publisher.send("PUB t 5\nsmall\n")
        let small = try #require(harness.broker.topicTable["t"]?.retainedBlock)
        let large = String(repeating: "x", count: 10_000)
        publisher.send("PUB t \(large.utf8.count)\n\(large)\n")
        let grown = try #require(harness.broker.topicTable["t"]?.retainedBlock)
        #expect(grown !== small)
        #expect(grown.frameLength > 10_000 && grown.capacity >= grown.frameLength)
        publisher.send("PUB t 4\ntiny\n")
        let shrunk = try #require(harness.broker.topicTable["t"]?.retainedBlock)
        #expect(shrunk !== grown, "a small message does not keep a 10 KB block")
        #expect(shrunk.capacity < 1_000)
        #expect(harness.broker.topicTable.retainedBytes == 4)
        #expect(harness.broker.topicTable.retainedFrameBytes == shrunk.frameLength)

        let reader = harness.connect()
        reader.send("#1 LATEST t\n")
        guard case .latest(1, let last)? = try reader.received().first else {
            Issue.record("no LAST")
            return
        }
        #expect(last.text == "tiny" && last.sequence == 3)
    }

    @Test("a LATEST of a large message counts as work by its size, so a pipeline of them is served in several turns")
    func largeRepliesAreWork() throws {
        let harness = BrokerHarness()
        let payload = String(repeating: "x", count: 100 << 10)
        harness.connect().send("PUB big \(payload.utf8.count)\n\(payload)\nPUB small 1\ns\n")
        let reader = harness.connect()
        var before = harness.broker.workDone
        reader.send("LATEST small\n")
        #expect(harness.broker.workDone - before == 1)
        before = harness.broker.workDone
        reader.send("LATEST big\n")
        #expect(harness.broker.workDone - before > 100, "a 100 KiB copy is worth a hundred small requests")
        _ = try reader.received()
    }
}
