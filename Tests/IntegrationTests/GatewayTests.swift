import Foundation
import Testing

/// notifyd-http with the real binaries: curl publishes and streams, `notify` on the other side (issue 39).
@Suite("HTTP gateway (real notifyd, notifyd-http and curl)", .timeLimit(.minutes(5)))
struct GatewayTests {
    @Test("curl -d publishes, retained (notify latest sees it); ?retain=no and X-Cache: no are not; the reply is the message as JSON")
    func publish() async throws {
        let daemon = try await TestDaemon.start()
        let gateway = try await TestGateway.start(for: daemon)
        let reply = try await gateway.curl(["-d", "backup done", gateway.url("/backup.status")])
        #expect(reply.status == 0)
        let object = try #require(TestGateway.objects([reply.output]).first, "\(reply.output)")
        #expect(object["event"] as? String == "message" && object["message"] as? String == "backup done")
        #expect(object["topic"] as? String == "backup.status" && object["seq"] as? Int == 1)
        #expect(try await daemon.notify(["latest", "backup.status"]).output == "backup done\n")

        for arguments in [["-d", "passing", gateway.url("/backup.status?retain=no")], ["-H", "X-Cache: no", "-d", "passing", gateway.url("/backup.status")]] {
            let passing = try await gateway.curl(arguments)
            #expect(TestGateway.objects([passing.output]).first?["message"] as? String == "passing", "\(arguments)")
        }
        #expect(try await daemon.notify(["latest", "backup.status"]).output == "backup done\n")

        let json = try await gateway.curl(["-X", "PUT", "--data-binary", "via put", gateway.url("/a.b")])
        #expect(TestGateway.objects([json.output]).first?["seq"] as? Int == 1)
        let form = try await gateway.curl(["-H", "Content-Type: application/json", "-d", #"{"topic":"a.b","message":"via json"}"#, gateway.url("/")])
        #expect(TestGateway.objects([form.output]).first?["seq"] as? Int == 2)
        let latest = try await gateway.curl(["-w", "\n%{http_code}", gateway.url("/a.b/latest")])
        #expect(latest.output.hasSuffix("\n200") && latest.output.contains(#""message":"via json""#))
        let missing = try await gateway.curl(["-w", "\n%{http_code}", gateway.url("/nothing.here/latest")])
        #expect(missing.output.hasSuffix("\n404") && missing.output.contains("nothing is buffered"))
        try await gateway.stop()
        try await daemon.stop()
    }

    @Test("a notify send of 300 messages reaches curl's /json, /sse and /raw streams, each in order, none lost or repeated")
    func streams() async throws {
        let daemon = try await TestDaemon.start()
        let gateway = try await TestGateway.start(for: daemon)
        let streams = try ["json", "sse", "raw"].map { format in
            // Headers to stderr: they leave once the daemon has the subscription, so nothing sent after is missed.
            try gateway.curlProcess(["-D", "/dev/stderr", gateway.url("/gw.t/\(format)")])
        }
        for stream in streams {
            try await stream.standardError.wait("the stream's headers") { $0.contains("200 OK") }
        }
        let messages = (1...300).map { "message \($0)" }
        let sent = try await daemon.notify(["send", "gw.t", "--lines"], input: Array((messages.joined(separator: "\n") + "\n").utf8))
        #expect(sent.status == 0, "\(sent.stderr)")

        try await streams[0].standardOutput.wait("300 JSON messages") { $0.contains(#""message":"message 300""#) }
        let json = TestGateway.objects(streams[0].standardOutput.lines)
        #expect(json.first?["event"] as? String == "open")
        #expect(json.filter { $0["event"] as? String == "message" }.map { $0["message"] as? String ?? "" } == messages)
        #expect(json.filter { $0["event"] as? String == "message" }.map { $0["seq"] as? Int ?? 0 } == Array(1...300))

        try await streams[1].standardOutput.wait("300 SSE messages") { $0.contains(#""message":"message 300""#) }
        let events = streams[1].standardOutput.text.components(separatedBy: "\n\n").filter { !$0.isEmpty }
        #expect(events.first?.hasPrefix("event: open\ndata: ") == true)
        // A message is its id: line, then its data: line (the default event's).
        let messageEvents = events.filter { $0.hasPrefix("id: ") }
        let data = messageEvents.compactMap { $0.split(separator: "\n").first { $0.hasPrefix("data: ") }.map { String($0.dropFirst(6)) } }
        #expect(TestGateway.objects(data).map { $0["message"] as? String ?? "" } == messages)
        #expect(zip(messageEvents, TestGateway.objects(data)).allSatisfy { $0.hasPrefix("id: \($1["id"] as? String ?? "?")\n") })

        try await streams[2].standardOutput.wait("300 raw lines") { $0.contains("message 300\n") }
        #expect(streams[2].standardOutput.lines == messages)
        for stream in streams { stream.signal(SIGTERM) }
        // The gateway outlives readers that go away, and lets go of their subscriptions.
        #expect(try await gateway.curl(["-d", "still here", gateway.url("/gw.t")]).status == 0)
        try await gateway.stop()
        try await daemon.stop()
    }

    @Test("?poll=1 answers what the history holds and closes: since=all (the default), a message id, a duration, a time to come")
    func poll() async throws {
        let daemon = try await TestDaemon.start()
        let gateway = try await TestGateway.start(for: daemon)
        let sent = try await daemon.notify(["send", "gw.h", "--lines"], input: Array("p1\np2\np3\np4\np5\n".utf8))
        #expect(sent.status == 0)
        func polled(_ query: String) async throws -> [[String: Any]] {
            let result = try await gateway.curl([gateway.url("/gw.h/json?poll=1" + query)])
            #expect(result.status == 0, "\(result.stderr)")
            return TestGateway.objects(result.output.split(separator: "\n").map(String.init))
        }
        let all = try await polled("")
        #expect(all.map { $0["message"] as? String ?? "" } == ["p1", "p2", "p3", "p4", "p5"])
        #expect(try await polled("&since=all").count == 5)
        let third = try #require(all[2]["id"] as? String)
        #expect(try await polled("&since=\(third)").map { $0["message"] as? String ?? "" } == ["p4", "p5"])
        #expect(try await polled("&since=10m").count == 5)
        #expect(try await polled("&since=\(Int(Date().timeIntervalSince1970) + 3_600)").isEmpty)
        // A reconnecting EventSource's Last-Event-ID resumes after that message.
        let resumed = try await gateway.curl(["-H", "Last-Event-ID: \(third)", gateway.url("/gw.h/sse?poll=1")])
        #expect(resumed.output.components(separatedBy: "\n").filter { $0.hasPrefix("data: ") }.count == 2, "\(resumed.output)")
        #expect(resumed.output.contains(#""message":"p4""#) && !resumed.output.contains(#""message":"p3""#))
        let latest = try await gateway.curl([gateway.url("/gw.h/json?poll=1&since=latest")])
        #expect(TestGateway.objects(latest.output.split(separator: "\n").map(String.init)).map { $0["message"] as? String ?? "" } == ["p5"])
        try await gateway.stop()
        try await daemon.stop()
    }

    @Test("bad requests are 4xx with a sentence and the gateway stays up: a bad topic, a body over max_payload, bad JSON, a bad since, a rule that denies")
    func refusals() async throws {
        let directory = try TemporaryDirectory()
        try "[rules]\nlocked = deny publish locked.> everyone\n".write(toFile: directory.path + "/notifyd.conf", atomically: true, encoding: .utf8)
        let daemon = try await TestDaemon.start(in: directory, arguments: ["--max-payload", "1024"])
        let gateway = try await TestGateway.start(for: daemon)
        func status(_ arguments: [String]) async throws -> (code: String, body: String) {
            let result = try await gateway.curl(["-w", "\n%{http_code}"] + arguments)
            let lines = result.output.split(separator: "\n", omittingEmptySubsequences: false)
            return (String(lines.last ?? ""), lines.dropLast().joined(separator: "\n"))
        }
        let badTopic = try await status(["-d", "x", gateway.url("/bad%20topic")])
        #expect(badTopic.code == "400" && badTopic.body.contains("whitespace"))
        let big = String(repeating: "x", count: 2_000)
        let tooLarge = try await status(["-d", big, gateway.url("/gw.big")])
        #expect(tooLarge.code == "413" && tooLarge.body.contains("max_payload of 1024"))
        let chunked = try await status(["-H", "Transfer-Encoding: chunked", "-d", big, gateway.url("/gw.big")])
        #expect(chunked.code == "413")
        let json = ["-H", "Content-Type: application/json"]
        #expect(try await status(json + ["-d", "{not json", gateway.url("/")]).code == "400")
        #expect(try await status(json + ["-d", #"{"message":"no topic"}"#, gateway.url("/")]).code == "400")
        #expect(try await status([gateway.url("/gw.t/json?since=yesterday")]).code == "400")
        let denied = try await status(["-d", "x", gateway.url("/locked.door")])
        #expect(denied.code == "403", "\(denied)")
        #expect(try await status(["-d", "fine", gateway.url("/gw.fine")]).code == "200")
        try await gateway.stop()
        try await daemon.stop()
    }

    @Test("the page at / lists each topic's latest message without JavaScript, escaped; ?filter= narrows it; a bad filter is said on the page")
    func page() async throws {
        let daemon = try await TestDaemon.start()
        let gateway = try await TestGateway.start(for: daemon)
        #expect(try await daemon.notify(["send", "page.a", #"<b>"bold" & more</b>"#]).status == 0)
        #expect(try await daemon.notify(["send", "other.b", "plain"]).status == 0)
        let page = try await gateway.curl([gateway.url("/")]).output
        #expect(page.hasPrefix("<!doctype html>"))
        #expect(page.contains(#"<td class="value">&lt;b&gt;&quot;bold&quot; &amp; more&lt;/b&gt;</td>"#))
        #expect(page.contains(#"<tr data-topic="other.b">"#) && page.contains(#"<td class="seq num">1</td>"#))
        #expect(!page.contains("<b>"))
        let narrowed = try await gateway.curl([gateway.url("/?filter=page.%2A")]).output
        #expect(narrowed.contains(#"data-topic="page.a""#) && !narrowed.contains(#"data-topic="other.b""#))
        let bad = try await gateway.curl([gateway.url("/?filter=a%20b")]).output
        #expect(bad.contains(#"<p class="status">"#) && bad.contains("whitespace"))
        try await gateway.stop()
        try await daemon.stop()
    }

    @Test("a stream open while the daemon restarts goes on after it, without a gap or a repeat")
    func daemonRestart() async throws {
        let directory = try TemporaryDirectory()
        var daemon = try await TestDaemon.start(in: directory)
        let gateway = try await TestGateway.start(for: daemon)
        let stream = try gateway.curlProcess(["-D", "/dev/stderr", gateway.url("/gw.r/json")])
        try await stream.standardError.wait("the stream's headers") { $0.contains("200 OK") }
        #expect(try await daemon.notify(["send", "gw.r", "--lines"], input: Array("r1\nr2\nr3\n".utf8)).status == 0)
        try await stream.standardOutput.wait("r3") { $0.contains(#""message":"r3""#) }
        try await daemon.stop()
        daemon = try await TestDaemon.start(in: directory)
        #expect(try await daemon.notify(["send", "gw.r", "--lines"], input: Array("r4\nr5\nr6\n".utf8)).status == 0)
        try await stream.standardOutput.wait("r6") { $0.contains(#""message":"r6""#) }
        let messages = TestGateway.objects(stream.standardOutput.lines).filter { $0["event"] as? String == "message" }
        #expect(messages.map { $0["message"] as? String ?? "" } == ["r1", "r2", "r3", "r4", "r5", "r6"])
        #expect(!stream.standardOutput.text.contains(#""event":"dropped""#))
        stream.signal(SIGTERM)
        try await gateway.stop()
        try await daemon.stop()
    }
}

/// notifyd-http's tokens and bounds, with the real binaries (issue 39).
@Suite("HTTP gateway: tokens and bounds (real notifyd, notifyd-http and curl)", .timeLimit(.minutes(5)))
struct GatewayAccessIntegrationTests {
    @Test("with --token-file: no token is 401, a read-only token reads and may not publish (403), a read-write one publishes")
    func tokens() async throws {
        let daemon = try await TestDaemon.start()
        let file = try TestGateway.makeTokenFile(in: daemon.directory.path, line: "read-only reader-0123456789abcdef\nread-write writer-0123456789abcdef\n").path
        let gateway = try await TestGateway.start(for: daemon, arguments: ["--token-file", file])
        func code(_ arguments: [String]) async throws -> String {
            let result = try await gateway.curl(["-o", "/dev/null", "-w", "%{http_code}"] + arguments)
            return result.output
        }
        #expect(try await code(["-d", "x", gateway.url("/gw.tok")]) == "401")
        #expect(try await code(["-H", "Authorization: Bearer wrong-0123456789abcdef", "-d", "x", gateway.url("/gw.tok")]) == "401")
        #expect(try await code(["-H", "Authorization: Bearer reader-0123456789abcdef", "-d", "x", gateway.url("/gw.tok")]) == "403")
        #expect(try await code(["-H", "Authorization: Bearer writer-0123456789abcdef", "-d", "x", gateway.url("/gw.tok")]) == "200")
        #expect(try await code(["-H", "Authorization: Bearer reader-0123456789abcdef", gateway.url("/gw.tok/latest")]) == "200")
        #expect(try await code(["-H", "Authorization: Bearer reader-0123456789abcdef", gateway.url("/gw.tok/json?poll=1")]) == "200")
        #expect(try await code([gateway.url("/gw.tok/latest")]) == "401")
        // ntfy's ?auth=, for a browser's EventSource: the header's value in URL-safe base 64, unpadded.
        let auth = Data("Bearer reader-0123456789abcdef".utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        #expect(try await code([gateway.url("/gw.tok/latest?auth=\(auth)")]) == "200")
        #expect(try await code([gateway.url("/gw.tok/latest?auth=bm90IGEgdG9rZW4")]) == "401")
        try await gateway.stop()
        try await daemon.stop()
    }

    @Test("beyond loopback without a token file or --allow-anonymous, notifyd-http refuses to start, and says why")
    func refusesToListenOpenly() async throws {
        let command = TestGateway.asGatewayUser([Binaries.notifydHTTP, "--listen", "0.0.0.0:0", "--socket", "/nonexistent"])
        let child = try ChildProcess(command[0], Array(command.dropFirst()))
        let status = try await child.exitStatus()
        #expect(status != 0)
        try await child.standardError.wait("its reason") { $0.contains("beyond loopback") && $0.contains("--allow-anonymous") }
    }

    @Test("connections per address are bounded: one more is closed as it comes, and there is room again once one ends")
    func connectionsPerAddress() async throws {
        let daemon = try await TestDaemon.start()
        let gateway = try await TestGateway.start(for: daemon, arguments: ["--max-connections-per-address", "1", "--keepalive", "1"])
        let stream = try gateway.startStream("/gw.cpa/json")
        try await stream.standardOutput.wait("the stream to open") { $0.contains(#""event":"open""#) }
        let refused = try await gateway.curl(["-d", "x", gateway.url("/gw.cpa")])
        #expect(refused.status != 0, "a second connection from the address was served: \(refused.output)")
        stream.signal(SIGTERM)
        _ = try await stream.exitStatus()
        try await withDeadline(.seconds(60), waitingFor: "room for a connection again") {
            while true {
                if try await gateway.curl(["-o", "/dev/null", "-w", "%{http_code}", "-d", "x", gateway.url("/gw.cpa")]).output == "200" { return }
                try await Task.sleep(for: .milliseconds(200))
            }
        }
        try await gateway.stop()
        try await daemon.stop()
    }

    @Test("streams per address are bounded (429 past it), and a stream whose reader left makes room again")
    func streamsPerAddress() async throws {
        let daemon = try await TestDaemon.start()
        let gateway = try await TestGateway.start(for: daemon, arguments: ["--max-streams-per-address", "2", "--keepalive", "1"])
        let streams = try (0..<2).map { _ in try gateway.curlProcess(["-D", "/dev/stderr", gateway.url("/gw.b/json")]) }
        for stream in streams { try await stream.standardError.wait("the stream's headers") { $0.contains("200 OK") } }
        let refused = try await gateway.curl(["-w", "\n%{http_code}", gateway.url("/gw.b/json")])
        #expect(refused.output.hasSuffix("\n429") && refused.output.contains("--max-streams-per-address"))
        streams[0].signal(SIGTERM)
        _ = try await streams[0].exitStatus()
        // The gateway finds the reader gone at its next write (a keepalive each second): then a stream fits again.
        try await withDeadline(.seconds(30), waitingFor: "a stream to fit again") {
            while true {
                let poll = try await gateway.curl(["-o", "/dev/null", "-w", "%{http_code}", gateway.url("/gw.b/json?poll=1")])
                if poll.output == "200" { return }
                try await Task.sleep(for: .milliseconds(200))
            }
        }
        streams[1].signal(SIGTERM)
        try await gateway.stop()
        try await daemon.stop()
    }
}

/// notifyd-http started the way systemd starts it from `notifyd-http.socket` (issue 39).
@Suite("HTTP gateway: socket activation (real notifyd, notifyd-http, systemd-socket-activate, curl)", .timeLimit(.minutes(3)))
struct GatewaySocketActivationTests {
    /// A loopback port free a moment ago.
    static func freePort() throws -> Int {
        let socket = Foundation.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw TestFailure("socket failed") }
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, length) == 0 && getsockname(socket, $0, &length) == 0 }
        }
        guard bound else { throw TestFailure("bind failed") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    @Test("started by systemd-socket-activate, it serves on the socket it was given (not --listen's): curl publishes, notify latest sees it; SIGTERM ends it with a stream open")
    func activated() async throws {
        let daemon = try await TestDaemon.start()
        let port = try Self.freePort()
        chmod(daemon.directory.path, 0o755)
        let activator = try ChildProcess("/usr/bin/systemd-socket-activate", ["-l", "127.0.0.1:\(port)"] + TestGateway.asGatewayUser([
            Binaries.notifydHTTP, "--socket", daemon.socketPath, "--listen", "127.0.0.1:1", "--allow-anonymous",
        ]))
        try await activator.standardError.wait("the socket to listen") { $0.contains("Listening on 127.0.0.1:\(port)") }
        // The first connection starts notifyd-http on the socket.
        let curl = try ChildProcess("/usr/bin/curl", ["-sS", "-d", "activated", "http://127.0.0.1:\(port)/gw.sa"])
        #expect(try await curl.exitStatus() == 0)
        try await activator.standardOutput.wait("notifyd-http to say where it listens") { $0.contains("(a socket from systemd)") }
        #expect(activator.standardOutput.text.contains("http://127.0.0.1:\(port) "))
        #expect(try await daemon.notify(["latest", "gw.sa"]).output == "activated\n")
        let stream = try ChildProcess("/usr/bin/curl", ["-sSN", "http://127.0.0.1:\(port)/gw.sa/json"])
        try await stream.standardOutput.wait("the stream to open") { $0.contains(#""event":"open""#) }
        activator.signal(SIGTERM)
        #expect(try await activator.exitStatus() == 0, "\(activator.standardError.text)")
        _ = try await stream.exitStatus()
        try await daemon.stop()
    }
}

extension GatewaySocketActivationTests {
    @Test("on a socket from systemd, --max-connections holds too: one connection more is closed as it comes, and there is room again once one ends")
    func activatedConnectionBound() async throws {
        let daemon = try await TestDaemon.start()
        let port = try Self.freePort()
        chmod(daemon.directory.path, 0o755)
        let activator = try ChildProcess("/usr/bin/systemd-socket-activate", ["-l", "127.0.0.1:\(port)"] + TestGateway.asGatewayUser([
            Binaries.notifydHTTP, "--socket", daemon.socketPath, "--max-connections", "1", "--keepalive", "1", "--allow-anonymous",
        ]))
        try await activator.standardError.wait("the socket to listen") { $0.contains("Listening on 127.0.0.1:\(port)") }
        let stream = try ChildProcess("/usr/bin/curl", ["-sSN", "http://127.0.0.1:\(port)/gw.cap/json"])
        try await stream.standardOutput.wait("the stream to open") { $0.contains(#""event":"open""#) }
        let refused = try ChildProcess("/usr/bin/curl", ["-sS", "-d", "x", "http://127.0.0.1:\(port)/gw.cap"])
        #expect(try await refused.exitStatus() != 0, "a second connection was served past --max-connections 1")
        stream.signal(SIGTERM)
        _ = try await stream.exitStatus()
        // The stream's connection is gone once the gateway sees it closed (at its next keepalive, each second): a
        // publish then fits, within the deadline.
        try await withDeadline(.seconds(60), waitingFor: "room for a connection again") {
            while true {
                let publish = try ChildProcess("/usr/bin/curl", ["-sS", "-o", "/dev/null", "-w", "%{http_code}", "-d", "x", "http://127.0.0.1:\(port)/gw.cap"])
                _ = try await publish.exitStatus()
                try await publish.standardOutput.wait("curl's output") { _ in publish.standardOutput.isClosed }
                if publish.standardOutput.text == "200" { return }
                try await Task.sleep(for: .milliseconds(200))
            }
        }
        activator.signal(SIGTERM)
        #expect(try await activator.exitStatus() == 0)
        try await daemon.stop()
    }
}
