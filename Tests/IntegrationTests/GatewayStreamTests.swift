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

    /// A counter of the daemon's `notify stats`.
    static func counter(_ name: String, of daemon: TestDaemon) async throws -> Int {
        let stats = try await daemon.notify(["stats"])
        let line = stats.output.split(separator: "\n").first { $0.split(separator: " ").first == name[...] }
        return try #require(line.flatMap { Int($0.split(separator: " ").last ?? "") }, "\(stats.output)")
    }

    /// Waits until the daemon queued bytes for a reader that fell behind and then sent them all: the gateway held
    /// the subscription back while the reader might still move, then took it all once the reader counted as stopped.
    static func waitForStall(of daemon: TestDaemon, after sent: ContinuousClock.Instant, stall: Duration) async throws {
        try await withDeadline(.seconds(60), waitingFor: "the gateway to take the daemon's queue for a stopped reader") {
            var queued = false
            while true {
                let bytes = try await counter("queued_bytes", of: daemon)
                queued = queued || bytes > 0
                // Seen queued and gone, or gone long after the stall if the queue came and went between looks.
                if bytes == 0, queued || ContinuousClock.now - sent > stall + .seconds(2) { return }
                try await Task.sleep(for: .milliseconds(100))
            }
        }
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
        try await Self.waitForStall(of: daemon, after: .now, stall: .seconds(1))
        // Now it reads again, until the newest message, which is never the one dropped.
        let arrived = await reader.read(timeout: .seconds(60)) { String(decoding: $0.suffix(8_192), as: UTF8.self).contains("m2000 ") }
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
        try await counter("subscriptions", of: daemon)
    }

    @Test("300 idle SSE streams on the daemon connections the gateway shares: one message reaches each of them; a stream asked for on a kept-alive connection, after another request, gets it too")
    func manyIdleStreamsGetOneMessage() async throws {
        let daemon = try await TestDaemon.start()
        let gateway = try await TestGateway.start(for: daemon, arguments: ["--max-streams", "400", "--max-streams-per-address", "400", "--max-connections", "400", "--max-connections-per-address", "400"])
        var readers: [RawSocket] = []
        for index in 0..<300 {
            let reader = try RawSocket(port: gateway.port)
            try reader.send(Self.request(gateway, topic: "gw.idle.\(index % 10)", format: "sse"))
            #expect(await reader.read { String(decoding: $0, as: UTF8.self).contains("event: open") }, "stream \(index) did not open")
            readers.append(reader)
        }
        // A first request the router hands to Hummingbird, then a stream on the same connection: served as before.
        let keptAlive = try RawSocket(port: gateway.port)
        try keptAlive.send("GET /gw.idle.0/latest?auth=\(gateway.auth) HTTP/1.1\r\nHost: 127.0.0.1:\(gateway.port)\r\n\r\n")
        #expect(await keptAlive.read { String(decoding: $0, as: UTF8.self).contains("nothing is buffered") })
        try keptAlive.send(Self.request(gateway, topic: "gw.idle.0", format: "sse"))
        #expect(await keptAlive.read { String(decoding: $0, as: UTF8.self).contains("event: open") })
        readers.append(keptAlive)
        // The 4 stream connections, the one for requests (the latest above), and this stats.
        #expect(try await Self.counter("connections", of: daemon) <= 6, "the streams share the gateway's 4 daemon connections")
        for topic in 0..<10 {
            #expect(try await daemon.notify(["send", "gw.idle.\(topic)", "wake \(topic)"]).status == 0)
        }
        for (index, reader) in readers.enumerated() {
            let topic = index == 300 ? 0 : index % 10
            #expect(await reader.read { String(decoding: $0, as: UTF8.self).contains("wake \(topic)") }, "stream \(index) never got its message")
        }
        try await gateway.stop()
        try await daemon.stop()
    }

    @Test("streams on one shared daemon connection: a reader that stops gets its dropped count, those that read lose nothing of a burst of 4,000 messages of 1 KiB")
    func stoppedReaderHoldsUpNoOther() async throws {
        let daemon = try await TestDaemon.start()
        // One connection for every stream: what one reader does not take must not hold up the others. A stream's
        // queue (2 MiB) and a reading reader's socket take a burst of 4 MB; a stopped reader's cannot.
        let gateway = try await TestGateway.start(for: daemon, arguments: ["--stream-buffer", "2097152", "--stream-connections", "1"])
        var readers: [RawSocket] = []
        for receiveBuffer in [1 << 20, 1 << 20, 4_096] {
            let reader = try RawSocket(port: gateway.port, receiveBuffer: receiveBuffer)
            try reader.send(Self.request(gateway, topic: "gw.shared", format: "raw"))
            #expect(await reader.read { String(decoding: $0, as: UTF8.self).contains("\r\n\r\n") })
            readers.append(reader)
        }
        #expect(try await Self.counter("connections", of: daemon) <= 3, "the gateway's streams share a connection")
        let stopped = readers.removeLast()
        let (one, two) = (readers[0], readers[1])
        let padding = String(repeating: "x", count: 1_000)
        let lines = (1...4_000).map { "m\($0) \(padding)" }.joined(separator: "\n") + "\n"
        // The send and the reading go on at once; the stopped reader reads nothing until the others have it all.
        async let sent = daemon.notify(["send", "gw.shared", "--lines"], input: Array(lines.utf8))
        async let first = one.read(timeout: .seconds(60)) { String(decoding: $0.suffix(4_096), as: UTF8.self).contains("m4000 ") }
        async let second = two.read(timeout: .seconds(60)) { String(decoding: $0.suffix(4_096), as: UTF8.self).contains("m4000 ") }
        let status = try await sent.status
        let (firstArrived, secondArrived) = await (first, second)
        #expect(status == 0)
        #expect(firstArrived && secondArrived, "a reader that reads never got the newest message")
        for reader in readers {
            let text = String(decoding: reader.received, as: UTF8.self)
            #expect(text.matches(of: #/(?m)^m(\d+) /#).compactMap { Int($0.output.1) } == Array(1...4_000), "a reader that reads lost some")
            #expect(!text.contains("notifyd: "), "a reader that kept reading was told of drops")
        }
        // The stopped one reads again: its queue kept the newest, and says how many it let go of.
        let arrived = await stopped.read(timeout: .seconds(60)) { String(decoding: $0.suffix(8_192), as: UTF8.self).contains("m4000 ") }
        #expect(arrived)
        let text = String(decoding: stopped.received, as: UTF8.self)
        let delivered = text.matches(of: #/(?m)^m(\d+) /#).compactMap { Int($0.output.1) }
        let dropped = text.matches(of: #/notifyd: (\d+) messages of/#).compactMap { Int($0.output.1) }
        #expect(!dropped.isEmpty, "no dropped count for the reader that stopped")
        #expect(delivered == delivered.sorted() && delivered.count + dropped.reduce(0, +) == 4_000, "delivered \(delivered.count), dropped \(dropped)")
        try await gateway.stop()
        try await daemon.stop()
    }

    @Test("a stream lets go of its subscription however it ends: its reader goes away (json, sse, raw), a WebSocket closes, a poll answers, a page is written")
    func subscriptionsLetGo() async throws {
        let daemon = try await TestDaemon.start()
        // Keepalives find the readers gone; a WebSocket is also pinged at their pace, and closed when its last ping
        // went unanswered, as this test's does not answer: at 1 s, a loaded machine saw the WebSocket's stream closed
        // (2 s after it opened) before the count of four was read. At 5 s it lives 10 s.
        let gateway = try await TestGateway.start(for: daemon, arguments: ["--keepalive", "5"])
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
        try await withDeadline(.seconds(60), waitingFor: "every stream's subscription to end in the daemon") {
            while try await Self.subscriptions(daemon) != 0 { try await Task.sleep(for: .milliseconds(100)) }
        }
        try await gateway.stop()
        try await daemon.stop()
    }
}
