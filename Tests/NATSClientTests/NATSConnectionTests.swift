import NIOCore
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
