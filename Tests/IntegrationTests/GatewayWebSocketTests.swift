import Foundation
import HummingbirdWSClient
import Logging
import NIOWebSocket
import Testing

/// notifyd-http's /ws with a WebSocket client (hummingbird-websocket's), the real daemon and gateway (issue 39).
@Suite("HTTP gateway: WebSocket (real notifyd and notifyd-http)", .timeLimit(.minutes(5)))
struct GatewayWebSocketTests {
    @Test("a notify send of 200 messages reaches a WebSocket client, one JSON text message each, in order, after open")
    func webSocket() async throws {
        let daemon = try await TestDaemon.start()
        // One stream per address: the poll at the end fits only once the WebSocket's stream let go of its place.
        let gateway = try await TestGateway.start(for: daemon, arguments: ["--max-streams-per-address", "1"])
        let messages = (1...200).map { "ws \($0)" }
        let received = Shared<[String]>([])
        let logger = Logger(label: "test")
        _ = try await withDeadline(.seconds(60), waitingFor: "200 messages over the WebSocket") {
            try await WebSocketClient.connect(url: "ws://127.0.0.1:\(gateway.port)/gw.w/ws?auth=\(gateway.auth)", logger: logger) { inbound, outbound, _ in
                var count = 0
                for try await message in inbound.messages(maxSize: 1 << 20) {
                    guard case .text(let text) = message else { continue }
                    received.withLock { $0.append(text) }
                    if text.contains(#""event":"open""#) {
                        // Subscribed: now the messages go.
                        let sent = try await daemon.notify(["send", "gw.w", "--lines"], input: Array((messages.joined(separator: "\n") + "\n").utf8))
                        #expect(sent.status == 0)
                    } else if text.contains(#""event":"message""#) {
                        count += 1
                        if count == messages.count { break }
                    }
                }
                try await outbound.close(.normalClosure, reason: nil)
            }
        }
        let objects = TestGateway.objects(received.withLock { $0 })
        #expect(objects.first?["event"] as? String == "open")
        #expect(objects.filter { $0["event"] as? String == "message" }.map { $0["message"] as? String ?? "" } == messages)
        // A WebSocket whose client closed lets go of its stream: with one stream per address, a poll fits again
        // (429 while the place is held; the gateway sees the close at once, and a leak never lets it through).
        try await withDeadline(.seconds(30), waitingFor: "the WebSocket's stream to let go of its place") {
            while try await gateway.curl(["-o", "/dev/null", "-w", "%{http_code}", gateway.url("/gw.w/json?poll=1")]).output != "200" {
                try await Task.sleep(for: .milliseconds(100))
            }
        }
        try await gateway.stop()
        try await daemon.stop()
    }

    @Test("a WebSocket's ping is answered with a pong; a client that answers none of the gateway's pings is closed at the second keepalive, and its stream let go of")
    func pingsBothWays() async throws {
        let daemon = try await TestDaemon.start()
        // The gateway may close a silent client between one and two keepalives after it opened: 3 s leaves a loaded
        // machine room to send its ping before that (at 1 s, a busy CI host sometimes did not).
        let gateway = try await TestGateway.start(for: daemon, arguments: ["--keepalive", "3"])
        let client = try RawSocket(port: gateway.port)
        try client.send(GatewayStreamTests.request(gateway, topic: "gw.ping", format: "ws"))
        #expect(await client.read { String(decoding: $0, as: UTF8.self).contains(#""event":"open""#) })
        // A masked, empty ping, as a client sends it; the pong is the two bytes of an empty one, unmasked.
        let start = client.received.count
        try client.send([0x89, 0x80, 0x01, 0x02, 0x03, 0x04])
        #expect(await client.read { $0[start...].firstRange(of: [0x8A, 0x00]) != nil }, "no pong for the client's ping")
        // The gateway's own pings (0x89, empty) go unanswered: the second keepalive closes the connection.
        #expect(await client.read { $0[start...].firstRange(of: [0x89, 0x00]) != nil }, "the gateway never pinged")
        #expect(await client.isClosedByPeer(timeout: .seconds(15)), "a client that answers no ping was kept")
        try await withDeadline(.seconds(15), waitingFor: "the closed WebSocket's stream to let go of its subscription") {
            while try await GatewayStreamTests.subscriptions(daemon) > 0 { try await Task.sleep(for: .milliseconds(50)) }
        }
        try await gateway.stop()
        try await daemon.stop()
    }
}
