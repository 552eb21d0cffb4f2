import NIOCore
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
