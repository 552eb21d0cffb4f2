import NIOCore
import NIOEmbedded
import NotifyBus
import NotifyBroker
import Testing

@testable import NotifyDaemon

/// Issue 18: a connection that only subscribes costs its socket and a few words of state; nothing of what it read
/// stays alive between its requests.
@Suite("What an idle connection holds (no socket)", .timeLimit(.minutes(3)))
struct IdleConnectionStateTests {
    @Test("a subscriber whose requests were all complete holds no receive buffer")
    func noReceiveBufferBetweenRequests() throws {
        let (subscriber, handler) = try Self.greetedConnection()
        try subscriber.writeInbound(ByteBuffer(string: "SUB idle.t\n#1 PING\n"))
        let replies = try writtenText(subscriber)
        #expect(replies.hasSuffix("#1 PONG\n"), "\(replies)")
        #expect(handler.unread == nil)
    }

    @Test("the start of a request keeps a copy its size, not the receive buffer it arrived in; once done, nothing")
    func partialRequestIsCopiedOut() throws {
        let (subscriber, handler) = try Self.greetedConnection()
        // As NIO reads: into a buffer of the size it guessed (64 KiB after large reads), the bytes at its start.
        var received = subscriber.allocator.buffer(capacity: 64 << 10)
        received.writeString("SUB idle.a\nSUB idle.b\n#1 PI")
        try subscriber.writeInbound(received)
        let kept = try #require(handler.unread)
        #expect(String(buffer: kept) == "#1 PI")
        #expect(kept.capacity <= 256, "a copy of what is left, not the 64 KiB buffer: \(kept.capacity)")
        try subscriber.writeInbound(ByteBuffer(string: "NG\n"))
        let replies = try writtenText(subscriber)
        #expect(replies.hasSuffix("#1 PONG\n"), "\(replies)")
        #expect(handler.unread == nil)
    }

    @Test("the start of a request at the end of a small receive buffer is copied out, so that NIO can read into it again")
    func smallBufferIsNotKept() throws {
        let (subscriber, handler) = try Self.greetedConnection()
        // NIO's first buffer, 64 bytes, filled: a whole SUB and 40 bytes of the next, over a quarter of it.
        var received = subscriber.allocator.buffer(capacity: 64)
        let start = "SUB idle.long.name.of.a.topic.that.goes.on.and.on.past.the.end"
        received.writeString("SUB idle.a\n" + start.prefix(64 - 11))
        #expect(received.readableBytes == 64 && received.capacity == 64)
        let receivedStorage = received.withVeryUnsafeBytes { UInt(bitPattern: $0.baseAddress) }
        try subscriber.writeInbound(received)
        let kept = try #require(handler.unread)
        #expect(String(buffer: kept) == String(start.prefix(64 - 11)))
        #expect(kept.withVeryUnsafeBytes { UInt(bitPattern: $0.baseAddress) } != receivedStorage, "a copy, not NIO's buffer")
        try subscriber.writeInbound(ByteBuffer(string: start.dropFirst(64 - 11) + "\n#1 PING\n"))
        #expect(try writtenText(subscriber).hasSuffix("#1 PONG\n"))
        #expect(handler.unread == nil)
    }

    @Test("a connection reads first into 64 bytes, and a publisher that fills its buffers reaches 64 KiB")
    func receiveBufferStartsSmall() {
        var allocator = NotifyServer.receiveAllocator
        #expect(allocator.buffer(allocator: ByteBufferAllocator()).capacity == 64)
        var sizes: [Int] = []
        for _ in 0..<12 {
            let size = allocator.nextBufferSize() ?? 0
            sizes.append(size)
            _ = allocator.record(actualReadBytes: size)
        }
        #expect(sizes.prefix(3) == [64, 128, 256])
        #expect(sizes.last == 64 << 10, "\(sizes)")
    }

    /// A connection through the daemon's handler, past its greeting.
    private static func greetedConnection() throws -> (EmbeddedChannel, BrokerConnectionHandler) {
        let connection = try embeddedConnection(to: Broker())
        _ = try writtenText(connection)
        return (connection, try connection.pipeline.syncOperations.handler(type: BrokerConnectionHandler.self))
    }
}
