import Foundation
import Testing

/// What notifyd-http's streams do for a reader that stops, and what they let go of when they end (issue 46).
@Suite("HTTP gateway: readers that stop, streams that end (real notifyd, notifyd-http, curl)", .timeLimit(.minutes(5)))
struct GatewayStreamTests {
    /// The request that opens `path` as `format` on `gateway`, over a raw socket.
    static func request(_ gateway: TestGateway, topic: String, format: String) -> String {
        var head = "GET /\(topic)/\(format)?auth=\(gateway.auth) HTTP/1.1\r\nHost: 127.0.0.1:\(gateway.port)\r\n"
        if format == "ws" {
            head += "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        }
        return head + "\r\n"
    }

    @Test("a reader of json, sse, raw or ws that stops reading while 2,000 messages of 1 KiB pass gets a dropped event with the count: what it got and what it was told it lost add up to all, in order", arguments: ["json", "sse", "raw", "ws"])
    func readerThatStops(format: String) async throws {
        let daemon = try await TestDaemon.start()
        let gateway = try await TestGateway.start(for: daemon, arguments: ["--stream-buffer", "65536"])
        let topic = "gw.slow.\(format)"
        let reader = try RawSocket(port: gateway.port, receiveBuffer: 4_096)
        try reader.send(Self.request(gateway, topic: topic, format: format))
        // Open: raw's is an empty line after the headers, the others' an open event.
        #expect(await reader.read { String(decoding: $0, as: UTF8.self).contains(format == "raw" ? "\r\n\r\n" : #""event":"open""#) })
        let padding = String(repeating: "x", count: 1_000)
        let lines = (1...2_000).map { "m\($0) \(padding)" }.joined(separator: "\n") + "\n"
        let sent = try await daemon.notify(["send", topic, "--lines"], input: Array(lines.utf8))
        #expect(sent.status == 0, "\(sent.stderr)")
        // Now it reads again, until the newest message, which is never the one dropped.
        let arrived = await reader.read(timeout: .seconds(60)) { String(decoding: $0, as: UTF8.self).contains("m2000 ") }
        #expect(arrived, "the newest message never came")
        let text = String(decoding: reader.received, as: UTF8.self)
        let delivered = text.matches(of: format == "raw" ? #/(?m)^m(\d+) /# : #/"message":"m(\d+) /#).compactMap { Int($0.output.1) }
        let dropped = text.matches(of: format == "raw" ? #/notifyd: (\d+) messages of/# : #/"event":"dropped","topic":"[^"]*","count":(\d+)/#)
            .compactMap { Int($0.output.1) }
        #expect(!dropped.isEmpty, "no dropped event: the stream held 2 MiB for a reader that stopped")
        #expect(delivered == delivered.sorted() && Set(delivered).count == delivered.count, "out of order or repeated")
        #expect(delivered.count + dropped.reduce(0, +) == 2_000, "delivered \(delivered.count), dropped \(dropped)")
        #expect(delivered.last == 2_000)
        try await gateway.stop()
        try await daemon.stop()
    }

    /// The daemon's count of subscriptions, from `notify stats`.
    static func subscriptions(_ daemon: TestDaemon) async throws -> Int {
        let stats = try await daemon.notify(["stats"])
        let line = stats.output.split(separator: "\n").first { $0.hasPrefix("subscriptions") }
        return try #require(line.flatMap { Int($0.split(separator: " ").last ?? "") }, "\(stats.output)")
    }

    @Test("a stream lets go of its subscription however it ends: its reader goes away (json, sse, raw), a WebSocket closes, a poll answers, a page is written")
    func subscriptionsLetGo() async throws {
        let daemon = try await TestDaemon.start()
        let gateway = try await TestGateway.start(for: daemon, arguments: ["--keepalive", "1"])
        #expect(try await Self.subscriptions(daemon) == 0)
        var readers: [RawSocket] = []
        for format in ["json", "sse", "raw", "ws"] {
            let reader = try RawSocket(port: gateway.port)
            try reader.send(Self.request(gateway, topic: "gw.end", format: format))
            #expect(await reader.read { String(decoding: $0, as: UTF8.self).contains(format == "raw" ? "\r\n\r\n" : #""event":"open""#) })
            readers.append(reader)
        }
        #expect(try await Self.subscriptions(daemon) == 4)
        for reader in readers { reader.shutdown() }
        #expect(try await GatewaySecurityTests.code(gateway, [gateway.url("/gw.end/json?poll=1")]) == "200")
        #expect(try await GatewaySecurityTests.code(gateway, [gateway.url("/")]) == "200")
        try await withDeadline(.seconds(30), waitingFor: "every stream's subscription to end in the daemon") {
            while try await Self.subscriptions(daemon) != 0 { try await Task.sleep(for: .milliseconds(100)) }
        }
        try await gateway.stop()
        try await daemon.stop()
    }
}
