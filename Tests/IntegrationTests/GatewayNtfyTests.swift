import Foundation
import Testing

/// notifyd-http as ntfy's clients use it (issue 46, items 2 and 4): every way ntfy takes a message, the fields a
/// notifyd message cannot carry refused by name, and the reply the daemon's own stamp.
@Suite("HTTP gateway: ntfy's publish forms (real notifyd, notifyd-http and curl)", .timeLimit(.minutes(5)))
struct GatewayNtfyTests {
    /// The status and body of a publish with `arguments`.
    static func publish(_ gateway: TestGateway, _ arguments: [String]) async throws -> (code: String, body: String) {
        let result = try await gateway.curl(["-w", "\n%{http_code}"] + arguments)
        let lines = result.output.split(separator: "\n", omittingEmptySubsequences: false)
        return (String(lines.last ?? ""), lines.dropLast().joined(separator: "\n"))
    }

    @Test("the message in the body, in X-Message, Message or m, in ?message= or ?m=, encoded as RFC 2047, or in the JSON form: each published as given, and the stream says so")
    func everyForm() async throws {
        let daemon = try await TestDaemon.start()
        let gateway = try await TestGateway.start(for: daemon)
        let stream = try gateway.startStream("/gw.ntfy/json")
        try await stream.standardOutput.wait("the stream to open") { $0.contains(#""event":"open""#) }
        let forms: [(arguments: [String], message: String)] = [
            (["-d", "Backup successful 😀", gateway.url("/gw.ntfy")], "Backup successful 😀"),
            (["-X", "PUT", "--data-binary", "put body", gateway.url("/gw.ntfy")], "put body"),
            (["-X", "POST", "-H", "X-Message: from X-Message", gateway.url("/gw.ntfy")], "from X-Message"),
            (["-X", "POST", "-H", "Message: from Message", gateway.url("/gw.ntfy")], "from Message"),
            (["-X", "POST", "-H", "m: from m", gateway.url("/gw.ntfy")], "from m"),
            (["-X", "POST", gateway.url("/gw.ntfy?message=from%20the%20query")], "from the query"),
            (["-X", "POST", gateway.url("/gw.ntfy?m=short%20form")], "short form"),
            (["-X", "POST", gateway.url("/gw.ntfy?message=plus+as+a+space%2B1")], "plus as a space+1"),
            (["-H", "Priority: u=4, i", "-d", "HTTP's own priority", gateway.url("/gw.ntfy")], "HTTP's own priority"),
            (["-X", "POST", "-H", "X-Message: =?UTF-8?B?w6l0w6k=?=", gateway.url("/gw.ntfy")], "été"),
            (["-X", "POST", "-H", "X-Message: =?UTF-8?Q?caf=C3=A9_au_lait?=", gateway.url("/gw.ntfy")], "café au lait"),
            (["-H", "Content-Type: application/json", "-d", #"{"topic":"gw.ntfy","message":"from JSON","priority":3}"#, gateway.url("/")], "from JSON"),
            (["-H", "Priority: default", "-d", "default priority", gateway.url("/gw.ntfy")], "default priority"),
        ]
        for (arguments, message) in forms {
            let (code, body) = try await Self.publish(gateway, arguments)
            #expect(code == "200", "\(arguments): \(body)")
            #expect(TestGateway.objects([body]).first?["message"] as? String == message, "\(arguments): \(body)")
            #expect(try await daemon.notify(["latest", "gw.ntfy"]).output == message + "\n", "\(arguments)")
        }
        let wanted = forms.map(\.message)
        try await stream.standardOutput.wait("every form's message on the stream") { _ in
            TestGateway.objects(stream.standardOutput.lines).filter { $0["event"] as? String == "message" }.count >= wanted.count
        }
        let streamed = TestGateway.objects(stream.standardOutput.lines).filter { $0["event"] as? String == "message" }
        #expect(streamed.map { $0["message"] as? String ?? "" } == wanted)
        stream.signal(SIGTERM)
        try await gateway.stop()
        try await daemon.stop()
    }

    @Test("a title, tags, a priority other than 3, a click link, an attachment (as header, query or JSON field), or a message given twice: 400 naming it, nothing published")
    func fieldsItCannotCarry() async throws {
        let daemon = try await TestDaemon.start()
        let gateway = try await TestGateway.start(for: daemon)
        let json = ["-H", "Content-Type: application/json"]
        let refused: [(arguments: [String], names: String)] = [
            (["-H", "Title: Backup", "-d", "x", gateway.url("/gw.field")], "title"),
            (["-H", "X-Title: Backup", "-d", "x", gateway.url("/gw.field")], "title"),
            (["-d", "x", gateway.url("/gw.field?title=Backup")], "title"),
            (["-H", "Tags: warning,skull", "-d", "x", gateway.url("/gw.field")], "tags"),
            (["-H", "X-Priority: 5", "-d", "x", gateway.url("/gw.field")], "priority"),
            (["-H", "p: high", "-d", "x", gateway.url("/gw.field")], "priority"),
            (["-H", "Click: https://example.com", "-d", "x", gateway.url("/gw.field")], "click"),
            (["-H", "Attach: https://example.com/a.jpg", "-d", "x", gateway.url("/gw.field")], "attach"),
            (json + ["-d", #"{"topic":"gw.field","message":"x","title":"T"}"#, gateway.url("/")], "title"),
            (json + ["-d", #"{"topic":"gw.field","message":"x","tags":["a"]}"#, gateway.url("/")], "tags"),
            (json + ["-d", #"{"topic":"gw.field","message":"x","priority":4}"#, gateway.url("/")], "priority"),
            (json + ["-d", #"{"topic":"gw.field","message":7}"#, gateway.url("/")], "message"),
            (json + ["-H", "Title: T", "-d", #"{"topic":"gw.field","message":"x"}"#, gateway.url("/")], "title"),
            (["-H", "X-Message: one", "-d", "two", gateway.url("/gw.field")], "X-Message"),
            (["-X", "POST", "-H", "X-Message: one", gateway.url("/gw.field?m=two")], "?m="),
            (["-H", "X-Priority: 3", "-H", "p: 5", "-d", "x", gateway.url("/gw.field")], "priority"),
        ]
        for (arguments, name) in refused {
            let (code, body) = try await Self.publish(gateway, arguments)
            #expect(code == "400", "\(arguments): \(code) \(body)")
            #expect(body.contains(name), "\(arguments): the refusal does not name \(name): \(body)")
        }
        #expect(try await daemon.notify(["latest", "gw.field"]).status == 1, "a refused publish published something")
        try await gateway.stop()
        try await daemon.stop()
    }

    @Test("the reply to a publish is the message as the daemon stamped it: its number, time and publisher, as /latest reads them back; with the daemon's history off too", arguments: [[], ["--history-messages", "0"]])
    func replyIsTheDaemonsStamp(daemonArguments: [String]) async throws {
        let daemon = try await TestDaemon.start(arguments: daemonArguments)
        let gateway = try await TestGateway.start(for: daemon)
        for round in 1...3 {
            let (code, body) = try await Self.publish(gateway, ["-d", "stamp \(round)", gateway.url("/gw.stamp")])
            #expect(code == "200")
            let reply = try #require(TestGateway.objects([body]).first)
            let latest = try await gateway.curl([gateway.url("/gw.stamp/latest")])
            let recorded = try #require(TestGateway.objects([latest.output.trimmingCharacters(in: .newlines)]).first)
            for field in ["id", "seq", "time_us", "uid", "pid", "message"] {
                #expect("\(reply[field] ?? "none")" == "\(recorded[field] ?? "none")", "\(field): the reply says \(reply[field] ?? "none"), the daemon \(recorded[field] ?? "none")")
            }
            #expect(reply["seq"] as? Int == round)
        }
        try await gateway.stop()
        try await daemon.stop()
    }
}
