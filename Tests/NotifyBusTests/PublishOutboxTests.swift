import NIOCore
import Synchronization
import Testing

@testable import NotifyBus
@testable import NotifyProtocol

/// The client's buffer of fire-and-forget publishes, without a socket: bounded, in order, and usable after a
/// publisher waiting for room was cancelled.
@Suite("Publish outbox (no socket)", .timeLimit(.minutes(3)))
struct PublishOutboxTests {
    static func publish(_ text: String) -> ByteBuffer { ByteBuffer(string: text) }
    static let topic = try! Topic("t")

    /// Waits, with a deadline, until `condition` holds: the outbox's state changes from another task.
    static func wait(for what: String, _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while !condition() {
            guard ContinuousClock.now < deadline else { throw CancellationError() }
            await Task.yield()
        }
    }

    @Test("publishes gather in call order, one drain is asked for per batch, and what was taken counts until written")
    func gathersInOrder() async throws {
        let drains = Atomic(0)
        let outbox = PublishOutbox(limit: 1 << 20) { drains.add(1, ordering: .relaxed) }
        try await outbox.append([Self.publish("a")], to: Self.topic, retain: false)
        try await outbox.append([Self.publish("b"), Self.publish("c")], to: Self.topic, retain: false)
        #expect(drains.load(ordering: .relaxed) == 1, "one drain for what gathered before it ran")
        let taken = try #require(outbox.take()?.bytes)
        #expect(String(buffer: taken) == "PUB t 1 noretain\na\nPUB t 1 noretain\nb\nPUB t 1 noretain\nc\n", "no request ids: the daemon's fast path")
        #expect(outbox.held.inChannel == taken.readableBytes)
        outbox.written(taken.readableBytes)
        #expect(outbox.held.inChannel == 0 && outbox.take()?.bytes == nil)
        try await outbox.append([Self.publish("d")], to: Self.topic, retain: false)
        #expect(drains.load(ordering: .relaxed) == 2)
    }

    @Test("past its bound a publisher waits until the socket takes what is held; nothing is dropped")
    func bounded() async throws {
        let outbox = PublishOutbox(limit: 100) {}
        try await outbox.append((0..<4).map { Self.publish("message \($0)") }, to: Self.topic, retain: false)  // 4 × 27 bytes: over the bound
        let publisher = Task { try await outbox.append([Self.publish("later")], to: Self.topic, retain: false) }
        try await Self.wait(for: "the publisher to wait for room") { outbox.held.waiting == 1 }
        #expect(outbox.held.pending == 4 * 27, "nothing more was taken")
        let taken = try #require(outbox.take()?.bytes)
        outbox.written(taken.readableBytes)
        try await publisher.value
        #expect(String(buffer: try #require(outbox.take()?.bytes)) == "PUB t 5 noretain\nlater\n")
    }

    @Test("a publisher cancelled while it waits for room throws and takes nothing; the outbox goes on")
    func cancelledWhileWaiting() async throws {
        let outbox = PublishOutbox(limit: 10) {}
        try await outbox.append([Self.publish("fills it")], to: Self.topic, retain: false)
        let publisher = Task { try await outbox.append([Self.publish("never")], to: Self.topic, retain: false) }
        try await Self.wait(for: "the publisher to wait for room") { outbox.held.waiting == 1 }
        publisher.cancel()
        await #expect(throws: CancellationError.self) { try await publisher.value }
        #expect(outbox.held.waiting == 0)
        let taken = try #require(outbox.take()?.bytes)
        #expect(String(buffer: taken) == "PUB t 8 noretain\nfills it\n")
        outbox.written(taken.readableBytes)
        try await outbox.append([Self.publish("next")], to: Self.topic, retain: false)
        #expect(String(buffer: try #require(outbox.take()?.bytes)) == "PUB t 4 noretain\nnext\n")
    }

    @Test("closed: waiting publishers get the error, what was pending is handed back, and a new outbox sends it first")
    func closedHandsBack() async throws {
        let outbox = PublishOutbox(limit: 40) {}
        try await outbox.append([Self.publish("pending")], to: Self.topic, retain: false)
        try await outbox.append([Self.publish("over")], to: Self.topic, retain: false)
        let publisher = Task { try await outbox.append([Self.publish("waits")], to: Self.topic, retain: false) }
        try await Self.wait(for: "the publisher to wait for room") { outbox.held.waiting == 1 }
        let error = NotifyClientError(.connectionClosed, "gone")
        let left = try #require(outbox.close(error))
        await #expect(throws: NotifyClientError.self) { try await publisher.value }
        await #expect(throws: NotifyClientError.self) { try await outbox.append([Self.publish("after")], to: Self.topic, retain: false) }

        let next = PublishOutbox(limit: 1 << 20) {}
        try await next.append([Self.publish("new")], to: Self.topic, retain: false)
        next.prepend(left)
        #expect(String(buffer: try #require(next.take()?.bytes)) == "PUB t 7 noretain\npending\nPUB t 4 noretain\nover\nPUB t 3 noretain\nnew\n")
    }

    @Test("an acknowledged publish goes out among the others in call order; when the connection is lost before it was written, it fails and is left out of what goes on the next connection")
    func acknowledgedInOrder() async throws {
        let outbox = PublishOutbox(limit: 1 << 20) {}
        try await outbox.append([Self.publish("first")], to: Self.topic, retain: false)
        let acknowledged = Task { try await outbox.appendAcknowledged(Self.publish("acked"), to: Self.topic, retain: false) }
        try await Self.wait(for: "the acknowledged publish to be encoded") { outbox.held.pending > 24 }
        try await outbox.append([Self.publish("last")], to: Self.topic, retain: false)

        let left = try #require(outbox.close(NotifyClientError(.connectionClosed, "gone")))
        #expect(String(buffer: left) == "PUB t 5 noretain\nfirst\nPUB t 4 noretain\nlast\n", "the fire-and-forget ones go on, the acknowledged one does not")
        await #expect(throws: NotifyClientError.self) { try await acknowledged.value }

        let next = PublishOutbox(limit: 1 << 20) {}
        let reply = Task { try await next.appendAcknowledged(Self.publish("acked"), to: Self.topic, retain: false) }
        try await Self.wait(for: "the acknowledged publish to be encoded") { next.held.pending > 0 }
        let (bytes, waiting) = try #require(next.take())
        let id = try #require(waiting.first?.id)
        #expect(waiting.count == 1 && String(buffer: bytes) == "#\(id) PUB t 5 noretain ack\nacked\n")
        waiting[0].reply.resume(returning: .ok(requestID: id, value: 7))
        guard case .ok(_, 7?) = try await reply.value else { Issue.record("the reply did not reach its publisher"); return }
        #expect(next.takeRequestID() != id, "ids are not used twice")
    }
}
