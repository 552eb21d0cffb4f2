import NIOCore
import NIOEmbedded
import Testing

@testable import NATSClient

/// The NATS client protocol as the bridge reads and writes it (no server): every operation, split anywhere,
/// headers with and without a status, and what is not the protocol refused before it is buffered.
@Suite("NATS protocol codec (no server)", .timeLimit(.minutes(3)))
struct NATSProtocolTests {
    /// Decodes `text`, fed in pieces of `step` bytes, as a channel would get it.
    static func decode(_ text: String, step: Int, decoder: NATSServerDecoder = NATSServerDecoder()) throws -> [NATSServerOperation] {
        var buffer = ByteBuffer()
        var operations: [NATSServerOperation] = []
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            buffer.writeBytes(bytes[offset..<min(offset + step, bytes.count)])
            offset += step
            while let operation = try decoder.decode(buffer: &buffer) { operations.append(operation) }
        }
        #expect(buffer.readableBytes == 0, "nothing left over")
        return operations
    }

    static let stream =
        "INFO {\"server_id\":\"x\",\"headers\":true,\"max_payload\":1048576}\r\n"
        + "PING\r\npong\r\n+OK\r\n"
        + "MSG notifyd.backup.status 7 5\r\nhello\r\n"
        + "MSG a.b 8 _INBOX.1 0\r\n\r\n"
        + "HMSG notifyd.x 9 33 36\r\nNATS/1.0\r\nNotifyd-Host: alpha\r\n\r\nabc\r\n"
        + "HMSG _INBOX.2 10 _INBOX.3 16 16\r\nNATS/1.0 503\r\n\r\n\r\n"
        + "-ERR 'Authorization Violation'\r\n"

    @Test("every server operation, whole and split at every byte", arguments: [1, 2, 7, 1_000])
    func serverOperations(step: Int) throws {
        let operations = try Self.decode(Self.stream, step: step)
        var host = NATSHeaders()
        host.append("Notifyd-Host", "alpha")
        #expect(operations == [
            .info("{\"server_id\":\"x\",\"headers\":true,\"max_payload\":1048576}"),
            .ping, .pong, .ok,
            .message(NATSMessage(subject: "notifyd.backup.status", sid: "7", payload: ByteBuffer(string: "hello"))),
            .message(NATSMessage(subject: "a.b", sid: "8", replyTo: "_INBOX.1", payload: ByteBuffer())),
            .message(NATSMessage(subject: "notifyd.x", sid: "9", headers: host, payload: ByteBuffer(string: "abc"))),
            .message(NATSMessage(subject: "_INBOX.2", sid: "10", replyTo: "_INBOX.3", headers: NATSHeaders(status: 503), payload: ByteBuffer())),
            .error("Authorization Violation"),
        ])
        guard case .message(let message) = operations[6] else { return }
        #expect(message.headers?["notifyd-host"] == "alpha", "header names compare without regard to case")
    }

    @Test("what a client writes reads back as the server would deliver it")
    func clientOperations() throws {
        var headers = NATSHeaders()
        headers.append("Notifyd-Host", "alpha")
        headers.append("Notifyd-Seq", "42")
        var buffer = ByteBuffer()
        buffer.writeNATSOperation(.publish(subject: "notifyd.t", replyTo: nil, headers: headers, payload: ByteBuffer(string: "hi")))
        buffer.writeNATSOperation(.publish(subject: "notifyd.u", replyTo: "_INBOX.9", headers: nil, payload: ByteBuffer(string: "x")))
        buffer.writeNATSOperation(.subscribe(subject: "notifyd.>", queueGroup: nil, sid: "1"))
        buffer.writeNATSOperation(.unsubscribe(sid: "1", maxMessages: 5))
        buffer.writeNATSOperation(.ping)
        let text = buffer.getString(at: 0, length: buffer.readableBytes)!
        #expect(text == "HPUB notifyd.t 50 52\r\nNATS/1.0\r\nNotifyd-Host: alpha\r\nNotifyd-Seq: 42\r\n\r\nhi\r\n"
            + "PUB notifyd.u _INBOX.9 1\r\nx\r\n" + "SUB notifyd.> 1\r\n" + "UNSUB 1 5\r\n" + "PING\r\n")
        // The server delivers a PUB as a MSG with the same sizes: the headers read back as written.
        let delivered = "HMSG notifyd.t 1 50 52\r\n" + headers.encoded + "hi\r\n"
        let operations = try Self.decode(delivered, step: 3)
        #expect(operations == [.message(NATSMessage(subject: "notifyd.t", sid: "1", headers: headers, payload: ByteBuffer(string: "hi")))])
    }

    @Test("what is not the protocol is refused, and nothing grows without bound", arguments: [
        "HELLO\r\n", "PING\n", "MSG a 1\r\n", "MSG a 1 x\r\n", "HMSG a 1 10 5\r\n", "MSG a 1 3\r\nabcXY",
        "HMSG a 1 4 4\r\nXXXX\r\n", String(repeating: "x", count: 5_000), "MSG a 1 999999999\r\n",
    ])
    func malformed(_ text: String) {
        #expect(throws: NATSServerDecoder.Malformed.self) {
            _ = try Self.decode(text, step: 4_096, decoder: NATSServerDecoder(maxControlLine: 4096, maxPayload: 1 << 20))
        }
    }

    @Test("a connection's handler takes operations split across reads, hands each message to its subscription, and closes on what is not the protocol", arguments: [1, 5, 64, 4_096])
    func handlerAcrossReads(step: Int) throws {
        let channel = EmbeddedChannel()
        let handler = NATSChannelHandler(info: channel.eventLoop.makePromise(of: String.self), decoder: NATSServerDecoder())
        try channel.pipeline.syncOperations.addHandler(handler)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 4222)).wait()
        var received: [NATSMessage] = []
        handler.addSubscription("9", .callback { received.append($0) })
        var closedBecause: NATSError?
        handler.onClosed = { closedBecause = $0 }
        var wire = "INFO {}\r\n"
        for index in 0..<50 {
            wire += index % 2 == 0 ? "HMSG notifyd.some.long.topic.name 9 18 19\r\nNATS/1.0\r\nA: \(index % 10)\r\n\r\nx\r\n" : "MSG notifyd.other 9 1\r\ny\r\n"
        }
        wire += "MSG notifyd.x 8 1\r\nz\r\n"  // a subscription this connection does not have: let go
        let bytes = Array(wire.utf8)
        var offset = 0
        while offset < bytes.count {
            try channel.writeInbound(ByteBuffer(bytes: bytes[offset..<min(offset + step, bytes.count)]))
            offset += step
        }
        #expect(try handler.infoFuture.wait() == "{}")
        #expect(received.count == 50)
        #expect(received.map(\.subject) == (0..<50).map { $0 % 2 == 0 ? "notifyd.some.long.topic.name" : "notifyd.other" })
        #expect(received.map { String(buffer: $0.payload) } == (0..<50).map { $0 % 2 == 0 ? "x" : "y" })
        #expect(received.enumerated().allSatisfy { index, message in index % 2 == 1 || message.headers?["A"] == "\(index % 10)" })
        #expect(closedBecause == nil && channel.isActive)

        try channel.writeInbound(ByteBuffer(string: "MSG notifyd.x 9 1\r\nz\r\nHELLO there\r\nMSG notifyd.x 9 1\r\nw\r\n"))
        #expect(received.count == 51, "what came before the bad line is taken; nothing after it")
        #expect(closedBecause?.description.contains("an unknown operation: HELLO") == true, "\(String(describing: closedBecause))")
        #expect(!channel.isActive)
    }
}

/// The few JSON fields the JetStream API's replies are read for.
@Suite("JSON fields of JetStream replies", .timeLimit(.minutes(3)))
struct JSONScanTests {
    @Test("numbers and strings by key, escapes undone; a missing key is nil")
    func fields() {
        let json = #"{"type":"io.nats.jetstream.api.v1.stream_create_response","error":{"code":400,"err_code":10058,"description":"stream name \"x\" in use"},"num_pending": 12}"#
        #expect(JSONScan.integer("err_code", in: json) == 10058)
        #expect(JSONScan.integer("num_pending", in: json) == 12)
        #expect(JSONScan.string("description", in: json) == #"stream name "x" in use"#)
        #expect(JSONScan.integer("missing", in: json) == nil && JSONScan.string("code", in: json) == nil)
        #expect(JSONScan.quoted("a\"b\\c\n\u{1}") == #""a\"b\\c\n\u0001""#)
    }
}
