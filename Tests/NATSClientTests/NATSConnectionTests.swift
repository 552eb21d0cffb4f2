import NIOCore
import NIOPosix
import NATSTestSupport
import Testing

@testable import NATSClient

/// The connection against a real nats-server on loopback: what one client publishes, with headers, another
/// receives; a flush means the server handled everything before it.
@Suite("NATS connection (real nats-server)", .timeLimit(.minutes(3)))
struct NATSConnectionTests {
    @Test("a message published with headers reaches a subscriber by wildcard, headers and payload intact")
    func publishSubscribe() async throws {
        let server = try await NATSServerProcess.start()
        defer { server.stop() }
        let subscriber = try await NATSConnection.connect(host: "127.0.0.1", port: server.port, name: "test-subscriber")
        let publisher = try await NATSConnection.connect(host: "127.0.0.1", port: server.port, name: "test-publisher")
        #expect(subscriber.serverInfo.contains("\"headers\":true"), "\(subscriber.serverInfo)")
        let messages = try await subscriber.subscribe(to: "notifyd.>")
        var headers = NATSHeaders()
        headers.append("Notifyd-Host", "alpha")
        headers.append("Notifyd-Seq", "7")
        try await publisher.publish(ByteBuffer(string: "done"), to: "notifyd.backup.status", headers: headers)
        try await publisher.publish(ByteBuffer(string: "plain"), to: "notifyd.other")
        try await publisher.publish(ByteBuffer(string: "elsewhere"), to: "other.subject")
        try await publisher.flush()
        var iterator = messages.makeAsyncIterator()
        let first = try #require(try await iterator.next())
        #expect(first.subject == "notifyd.backup.status" && first.payload == ByteBuffer(string: "done"))
        #expect(first.headers?["Notifyd-Host"] == "alpha" && first.headers?["Notifyd-Seq"] == "7")
        let second = try #require(try await iterator.next())
        #expect(second.subject == "notifyd.other" && second.headers == nil && second.payload == ByteBuffer(string: "plain"))
        await publisher.close()
        await subscriber.close()
    }

    @Test("a request's reply subject cannot be guessed from the last one: a client that saw a reply and answers the next guess first is not believed")
    func forgedReply() async throws {
        let server = try await NATSServerProcess.start()
        defer { server.stop() }
        let requester = try await NATSConnection.connect(host: "127.0.0.1", port: server.port, name: "requester")
        let responder = try await NATSConnection.connect(host: "127.0.0.1", port: server.port, name: "responder")
        let attacker = try await NATSConnection.connect(host: "127.0.0.1", port: server.port, name: "attacker")
        let requests = try await responder.subscribe(to: "svc.echo")
        let replies = try await attacker.subscribe(to: "_INBOX.>")
        try await responder.flush()
        try await attacker.flush()
        // The real reply to the second request waits until the attacker's have reached the server: they come first.
        let (attackerDone, signal) = AsyncStream<Void>.makeStream()
        let answering = Task {
            var seen = 0
            for try await request in requests {
                seen += 1
                if seen == 2 {
                    for await _ in attackerDone { break }
                }
                try await responder.publish(ByteBuffer(string: "real \(seen)"), to: request.replyTo!)
                if seen == 2 { return }
            }
        }
        // Generous deadlines: on a busy runner the responder's task may wait its turn for seconds.
        #expect(String(buffer: try await requester.request(ByteBuffer(string: "1"), to: "svc.echo", timeout: .seconds(60)).payload) == "real 1")
        // What the attacker learned: the first reply's subject, `<inbox>.<token>`.
        var seenReplies = replies.makeAsyncIterator()
        let first = try #require(try await seenReplies.next()).subject
        let inbox = String(first[..<first.lastIndex(of: ".")!])
        let token = String(first[first.index(after: first.lastIndex(of: ".")!)...])
        let second = Task { try await requester.request(ByteBuffer(string: "2"), to: "svc.echo", timeout: .seconds(60)) }
        // Every guess a counter would make, in both bases a token might be written in.
        for guess in Set([UInt64(token) ?? 0, UInt64(token, radix: 36) ?? 0].flatMap { base in (1...16).map { base &+ $0 } }) {
            for text in [String(guess), String(guess, radix: 36)] {
                try await attacker.publish(ByteBuffer(string: "forged"), to: inbox + "." + text)
            }
        }
        try await attacker.flush()
        signal.yield()
        #expect(String(buffer: try await second.value.payload) == "real 2", "the forged answer to a guessed token was ignored")
        try await answering.value
        for connection in [requester, responder, attacker] { await connection.close() }
    }

    @Test("a server that asks for TLS and then says nothing is given up at the timeout, and the error says so, not that the server closed")
    func silentTLS() async throws {
        // Sends its INFO, asking for TLS, and never answers the handshake.
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(SilentTLSServer()) }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        let port = try #require(server.localAddress?.port)
        do {
            _ = try await NATSConnection.connect(host: "127.0.0.1", port: port, name: "t", tls: NATSTLSSettings(isRequired: true), timeout: .seconds(3))
            Issue.record("connected to a server that never finished TLS")
        } catch let error as NATSError {
            // On a runner so busy that even the INFO takes 3 s, that is what is said: the timeout either way.
            let said = error.description
            #expect(said.contains("did not finish the TLS handshake and the login within 3 s") || said.contains("sent no NATS INFO within 3 s"), "\(error)")
            #expect(!said.contains("server closed"), "\(error)")
        }
        try await server.close()
    }

    @Test("nothing listening: connecting fails with an error that names the address")
    func unreachable() async throws {
        let server = try await NATSServerProcess.start()
        let port = server.port
        server.stop()
        do {
            _ = try await NATSConnection.connect(host: "127.0.0.1", port: port, name: "t")
            Issue.record("connected to a stopped server")
        } catch let error as NATSError {
            #expect(error.description.contains("127.0.0.1:\(port)"), "\(error)")
        }
    }
}

/// Says its INFO, asking for TLS, once a client connects, and nothing after.
private final class SilentTLSServer: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer

    func channelActive(context: ChannelHandlerContext) {
        context.writeAndFlush(NIOAny(ByteBuffer(string: #"INFO {"server_id":"silent","tls_required":true}"# + "\r\n")), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}
}
