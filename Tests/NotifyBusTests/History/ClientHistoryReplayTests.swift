import NIOCore
import NIOEmbedded
import Testing

@testable import NotifyBus
@testable import NotifyProtocol

/// A subscription that resumes from history on a connection where another subscription already holds its pattern:
/// live messages reach the connection while its replay is still coming.
@Suite("Client: a history replay beside live messages (no socket)", .timeLimit(.minutes(3)))
struct ClientHistoryReplayTests {
    static func frame(_ kind: MessageFrameKind, id: UInt64? = nil, _ sequence: UInt64) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeMessageFrame(
            kind,
            requestID: id,
            topic: "t",
            sequence: sequence,
            time: PublishTime(microsecondsSinceEpoch: 1_795_305_600_000_000 + sequence),
            publisher: Publisher(uid: 1000, pid: 1),
            payload: ByteBuffer(string: "m\(sequence)")
        )
        return buffer
    }

    @Test("a live message that overtakes the replay is left out, and the replay hands over every message in order")
    func liveDuringReplay() async throws {
        let (channel, handler) = try greetedClientHandler()

        // One subscription already holds the pattern; the other resumes after 40.
        let live = try LocalSubscriber("t")
        _ = handler.addSubscription(live.local)
        let resuming = try LocalSubscriber("t")
        let id = handler.addSubscription(resuming.local).id
        let reply = channel.eventLoop.makePromise(of: ServerFrame.self)
        handler.send(.subscribe(try TopicPattern("t"), SubscribeOptions(since: .sequence(40))), reply: reply, written: nil, replaysFor: id)

        // 42 was published after 41 and before the daemon took the SUB: it comes live first, then in the replay.
        try channel.writeInbound(Self.frame(.delivery, 42))
        for sequence: UInt64 in [41, 42] { try channel.writeInbound(Self.frame(.latest, id: 1, sequence)) }
        try channel.writeInbound(ByteBuffer(string: "#1 OK\n"))
        try channel.writeInbound(Self.frame(.delivery, 43))

        #expect(try await resuming.sequences() == [41, 42, 43], "each once, in order, none lost")
        #expect(try await live.sequences() == [42, 43])
        _ = try await reply.futureResult.get()
    }
}
