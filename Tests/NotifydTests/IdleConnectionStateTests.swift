import NIOCore
import NIOEmbedded
import NotifyBus
import Testing

@testable import notifyd

/// Issue 18: a connection that only subscribes costs its socket and a few words of state; nothing of what it read
/// stays alive between its requests.
@Suite("What an idle connection holds (no socket)")
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
