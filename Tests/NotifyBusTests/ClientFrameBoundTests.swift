import NIOCore
import NIOEmbedded
import Synchronization
import Testing

@testable import NotifyBus
@testable import NotifyProtocol

/// What a client holds of a frame whose end does not come: whatever is at the socket, one frame's worth at most.
@Suite("Client frame bound (no socket)", .timeLimit(.minutes(3)))
struct ClientFrameBoundTests {
    @Test("a list that claims endless lines closes the connection at the frame bound, failing the request that waits")
    func endlessListIsRefused() throws {
        let (channel, handler) = try greetedClientHandler()
        handler.largestFrame = 4_096
        let reply = channel.eventLoop.makePromise(of: ServerFrame.self)
        let outcome = Mutex<Result<ServerFrame, any Error>?>(nil)
        reply.futureResult.whenComplete { result in outcome.withLock { $0 = result } }
        handler.send(.topics(nil), reply: reply, written: nil)
        try channel.writeInbound(ByteBuffer(string: "#1 TOPICS 1000000000\n"))
        let line = ByteBuffer(string: "some.topic seq=1 published=1 delivered=1\n")
        var sent = 0
        // Each read is within the bound; together they pass it.
        while outcome.withLock({ $0 }) == nil && sent < 1_000 {
            try channel.writeInbound(line)
            channel.embeddedEventLoop.run()
            sent += 1
        }
        #expect(sent * line.readableBytes <= 4_096 + line.readableBytes, "no more than the bound was held: \(sent) lines")
        guard case .failure(let failure) = outcome.withLock({ $0 }), let error = failure as? NotifyClientError else {
            Issue.record("the request did not fail as a client error: \(String(describing: outcome.withLock { $0 })), after \(sent) lines")
            return
        }
        #expect(error.kind == .protocolViolation && error.message.contains("4096"), "\(error)")
        let closed = Mutex(false)
        channel.closeFuture.whenComplete { _ in closed.withLock { $0 = true } }
        #expect(closed.withLock { $0 }, "the connection is closed")
    }
}
