import Foundation
import Testing
import NATSTestSupport

/// notifyd-http safe by default (issue 46): no uid lent to other local users or to web pages, with the real
/// binaries and curl (a browser's headers written as a browser sends them).
@Suite("HTTP gateway: safe by default (real notifyd, notifyd-http and curl)", .timeLimit(.minutes(5)))
struct GatewaySecurityTests {
    /// The HTTP status curl got for `arguments` (`-o /dev/null`), with the gateway's token unless `token` is false.
    static func code(_ gateway: TestGateway, _ arguments: [String], token: Bool = true) async throws -> String {
        let arguments = ["-o", "/dev/null", "-w", "%{http_code}"] + arguments
        return try await (token ? gateway.curl(arguments) : TestGateway.curl(arguments)).output
    }

    @Test("as root it refuses to start, exit 77, and says to run it as a user of its own", .enabled(if: getuid() == 0))
    func refusesRoot() async throws {
        let child = try ChildProcess(Binaries.notifydHTTP, ["--listen", "127.0.0.1:0", "--socket", "/nonexistent", "--allow-anonymous"])
        #expect(try await child.exitStatus() == 77)
        try await child.standardError.wait("its reason") { $0.contains("does not run as root") && $0.contains("User=notifyd-http") }
    }

    @Test("with no token file and no --allow-anonymous, loopback takes a token too: the gateway makes one (0600) at its first start and keeps it")
    func ownTokenByDefault() async throws {
        let daemon = try await TestDaemon.start()
        let state = daemon.directory.path + "/gateway-state"
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        chown(state, TestGateway.uid, TestGateway.uid)
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_STATE_HOME"] = state
        let path = state + "/notifyd-http/token"
        var gateway = try await TestGateway.start(for: daemon, access: .ownToken, environment: environment)
        var status = stat()
        #expect(stat(path, &status) == 0 && status.st_mode & 0o777 == 0o600 && status.st_uid == TestGateway.uid)
        let text = try String(contentsOfFile: path, encoding: .utf8)
        let token = try #require(text.split(separator: "\n").first { $0.hasPrefix("read-write ") }.map { String($0.dropFirst(11)) })
        #expect(token.count == 48)
        #expect(try await Self.code(gateway, ["-d", "x", gateway.url("/gw.own")], token: false) == "401")
        #expect(try await Self.code(gateway, [gateway.url("/gw.own/latest")], token: false) == "401")
        #expect(try await Self.code(gateway, ["-H", "Authorization: Bearer \(token)", "-d", "x", gateway.url("/gw.own")], token: false) == "200")
        // A token followed by more is not the token.
        #expect(try await Self.code(gateway, ["-H", "Authorization: Bearer \(token)\(String(repeating: "A", count: 256))", gateway.url("/gw.own/latest")], token: false) == "401")
        try await gateway.stop()
        gateway = try await TestGateway.start(for: daemon, access: .ownToken, environment: environment)
        #expect(try String(contentsOfFile: path, encoding: .utf8) == text, "the token is kept across restarts")
        #expect(try await Self.code(gateway, ["-H", "Authorization: Bearer \(token)", gateway.url("/gw.own/latest")], token: false) == "200")
        try await gateway.stop()
        try await daemon.stop()
    }

    @Test("a token file that others may read or change is refused at start, with its mode and what to do")
    func tokenFileMode() async throws {
        let daemon = try await TestDaemon.start()
        let file = try TestGateway.makeTokenFile(in: daemon.directory.path)
        chmod(file.path, 0o666)
        chmod(daemon.directory.path, 0o755)
        let command = TestGateway.asGatewayUser([Binaries.notifydHTTP, "--listen", "127.0.0.1:0", "--socket", daemon.socketPath, "--token-file", file.path])
        let child = try ChildProcess(command[0], Array(command.dropFirst()))
        #expect(try await child.exitStatus() != 0)
        try await child.standardError.wait("the reason") { $0.contains("mode 666") && $0.contains("chmod 600") }
        try await daemon.stop()
    }

    @Test("a Host that is not the gateway's address is refused (DNS rebinding), localhost and --allow-host names are served")
    func hostHeader() async throws {
        let daemon = try await TestDaemon.start()
        let gateway = try await TestGateway.start(for: daemon, arguments: ["--allow-host", "notify.example"])
        let port = gateway.port
        #expect(try await Self.code(gateway, ["-H", "Host: rebound.example:\(port)", "-d", "x", gateway.url("/gw.host")]) == "403")
        #expect(try await Self.code(gateway, ["-H", "Host: rebound.example:\(port)", gateway.url("/gw.host/json?poll=1")]) == "403")
        #expect(try await Self.code(gateway, ["-H", "Host: 127.0.0.1:\(port + 1)", gateway.url("/gw.host/json?poll=1")]) == "403")
        #expect(try await daemon.notify(["latest", "gw.host"]).status == 1, "the refused publish published nothing")
        #expect(try await Self.code(gateway, ["-H", "Host: localhost:\(port)", "-d", "x", gateway.url("/gw.host")]) == "200")
        #expect(try await Self.code(gateway, ["-H", "Host: notify.example", "-d", "y", gateway.url("/gw.host")]) == "200")
        #expect(try await Self.code(gateway, ["-d", "z", gateway.url("/gw.host")]) == "200")
        try await gateway.stop()
        try await daemon.stop()
    }

    @Test("a request or WebSocket upgrade from a page of another origin is refused, and publishes nothing; the gateway's own origin and --allow-origin are served")
    func originHeader() async throws {
        let daemon = try await TestDaemon.start()
        let gateway = try await TestGateway.start(for: daemon, arguments: ["--allow-origin", "https://dash.example"])
        let foreign = ["-H", "Origin: http://evil.example"]
        // What a page's no-cors fetch sends: text/plain, with its origin.
        #expect(try await Self.code(gateway, foreign + ["-H", "Content-Type: text/plain", "-d", "forged", gateway.url("/gw.origin")]) == "403")
        #expect(try await Self.code(gateway, ["-H", "Origin: null", "-d", "forged", gateway.url("/gw.origin")]) == "403")
        #expect(try await daemon.notify(["latest", "gw.origin"]).status == 1, "nothing was published")
        let upgrade = ["-H", "Connection: Upgrade", "-H", "Upgrade: websocket", "-H", "Sec-WebSocket-Version: 13", "-H", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="]
        // A refused upgrade is answered as the same request over HTTP would be: 403, not 101.
        #expect(try await Self.code(gateway, foreign + upgrade + ["--max-time", "5", gateway.url("/%3E/ws?since=all")]) == "403")
        #expect(try await Self.code(gateway, foreign + [gateway.url("/%3E/json?poll=1")]) == "403")
        #expect(try await Self.code(gateway, ["-H", "Origin: http://127.0.0.1:\(gateway.port)", "-d", "own", gateway.url("/gw.origin")]) == "200")
        #expect(try await Self.code(gateway, ["-H", "Origin: https://dash.example", "-d", "allowed", gateway.url("/gw.origin")]) == "200")
        #expect(try await daemon.notify(["latest", "gw.origin"]).output == "allowed\n")
        try await gateway.stop()
        try await daemon.stop()
    }

    @Test("POST / takes ntfy's JSON form only as application/json (415 otherwise, nothing published)")
    func jsonNeedsItsType() async throws {
        let daemon = try await TestDaemon.start()
        let gateway = try await TestGateway.start(for: daemon)
        let body = #"{"topic":"gw.json","message":"hi"}"#
        for type in ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"] {
            #expect(try await Self.code(gateway, ["-H", "Content-Type: \(type)", "-d", body, gateway.url("/")]) == "415", "\(type)")
        }
        #expect(try await daemon.notify(["latest", "gw.json"]).status == 1)
        #expect(try await Self.code(gateway, ["-H", "Content-Type: application/json; charset=utf-8", "-d", body, gateway.url("/")]) == "200")
        #expect(try await daemon.notify(["latest", "gw.json"]).output == "hi\n")
        try await gateway.stop()
        try await daemon.stop()
    }
}

extension GatewayBoundsTests {
    @Test("a client range past its share of retained topics gets a 429 that says so; ?retain=no and replacing its own topics still go")
    func retainedShare() async throws {
        let daemon = try await TestDaemon.start()
        let gateway = try await TestGateway.start(for: daemon, arguments: ["--max-retained-topics-per-address", "2"])
        #expect(try await GatewaySecurityTests.code(gateway, ["-d", "1", gateway.url("/gw.share.1")]) == "200")
        #expect(try await GatewaySecurityTests.code(gateway, ["-d", "2", gateway.url("/gw.share.2")]) == "200")
        let third = try await gateway.curl(["-w", "\n%{http_code}", "-d", "3", gateway.url("/gw.share.3")])
        #expect(third.output.hasSuffix("\n429") && third.output.contains("--max-retained-topics-per-address"), "\(third.output)")
        #expect(try await daemon.notify(["latest", "gw.share.3"]).status == 1)
        #expect(try await GatewaySecurityTests.code(gateway, ["-d", "3", gateway.url("/gw.share.3?retain=no")]) == "200")
        #expect(try await GatewaySecurityTests.code(gateway, ["-d", "again", gateway.url("/gw.share.2")]) == "200")
        // A topic the daemon no longer holds (cleared here) stops counting once the range is at its share.
        #expect(try await daemon.notify(["clear", "gw.share.1"]).status == 0)
        #expect(try await GatewaySecurityTests.code(gateway, ["-d", "3", gateway.url("/gw.share.3")]) == "200")
        #expect(try await GatewaySecurityTests.code(gateway, ["-d", "4", gateway.url("/gw.share.4")]) == "429")
        try await gateway.stop()
        try await daemon.stop()
    }
}

/// notifyd-http's bounds against a client that holds connections (issue 46).
@Suite("HTTP gateway: timeouts and bounds per range (real notifyd and notifyd-http)", .timeLimit(.minutes(5)))
struct GatewayBoundsTests {
    @Test("a connection that never finishes its request head is closed at --header-timeout; an idle keep-alive one at --idle-timeout")
    func timeouts() async throws {
        let daemon = try await TestDaemon.start()
        let gateway = try await TestGateway.start(for: daemon, arguments: ["--header-timeout", "1", "--idle-timeout", "2"])
        let slow = try RawSocket(port: gateway.port)
        try slow.send("GET /gw.t/latest HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        #expect(await slow.isClosedByPeer(timeout: .seconds(20)), "a head left unfinished keeps its connection")
        // Blank lines before the request line (which HTTP's parsers skip) do not end a head.
        let sly = try RawSocket(port: gateway.port)
        try sly.send("\r\n\r\n\n\nGET /gw.t/latest HTTP/1.1\r\n")
        #expect(await sly.isClosedByPeer(timeout: .seconds(20)), "blank lines first disarmed the deadline")
        let idle = try RawSocket(port: gateway.port)
        try idle.send("GET /gw.t/latest HTTP/1.1\r\nHost: 127.0.0.1:\(gateway.port)\r\nAuthorization: Bearer \(gateway.token!)\r\n\r\n")
        #expect(await idle.isClosedByPeer(timeout: .seconds(20)), "an idle connection after its response stays open")
        #expect(String(decoding: idle.received, as: UTF8.self).hasPrefix("HTTP/1.1 404"))
        try await gateway.stop()
        try await daemon.stop()
    }

    @Test("over loopback each local user is one client for the bounds: another user's connection is served beside one user's at its bound", .enabled(if: getuid() == 0))
    func loopbackPerUser() async throws {
        let daemon = try await TestDaemon.start()
        let gateway = try await TestGateway.start(for: daemon, arguments: ["--max-connections-per-address", "1", "--keepalive", "1"])
        // root holds its one connection, from 127.0.0.2.
        let holder = try RawSocket(port: gateway.port, source: "127.0.0.2")
        try holder.send("GET /gw.u/json HTTP/1.1\r\nHost: 127.0.0.1:\(gateway.port)\r\nAuthorization: Bearer \(gateway.token!)\r\n\r\n")
        #expect(await holder.read { String(decoding: $0, as: UTF8.self).contains(#""event":"open""#) })
        // Another user (uid 1000) is served all the same; root itself is not, from any loopback address.
        let other = try ChildProcess("/usr/bin/setpriv", ["--reuid=1000", "--regid=1000", "--clear-groups", "/usr/bin/curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}"]
            + gateway.authorization + ["-d", "x", gateway.url("/gw.u")])
        #expect(try await other.exitStatus() == 0)
        try await other.standardOutput.wait("curl's output") { _ in other.standardOutput.isClosed }
        #expect(other.standardOutput.text == "200", "another user was refused beside root's connection: \(other.standardOutput.text)")
        let same = try await gateway.curl(["--interface", "127.0.0.3", "-d", "x", gateway.url("/gw.u")])
        #expect(same.status != 0, "root's second connection was served past its bound: \(same.output)")
        holder.shutdown()
        try await gateway.stop()
        try await daemon.stop()
    }

    @Test("all of loopback is one range for the bounds: a connection from 127.0.0.2 counts with 127.0.0.1's, the same user's")
    func loopbackIsOneRange() async throws {
        let daemon = try await TestDaemon.start()
        let gateway = try await TestGateway.start(for: daemon, arguments: ["--max-connections-per-address", "1", "--keepalive", "1"])
        let holder = try RawSocket(port: gateway.port, source: "127.0.0.2")
        try holder.send("GET /gw.r/json HTTP/1.1\r\nHost: 127.0.0.1:\(gateway.port)\r\nAuthorization: Bearer \(gateway.token!)\r\n\r\n")
        #expect(await holder.read { String(decoding: $0, as: UTF8.self).contains(#""event":"open""#) })
        let other = try await gateway.curl(["--interface", "127.0.0.3", "-d", "x", gateway.url("/gw.r")])
        #expect(other.status != 0, "a connection from 127.0.0.3 was served beside 127.0.0.2's: \(other.output)")
        holder.shutdown()
        try await withDeadline(.seconds(30), waitingFor: "room for a connection again") {
            while try await GatewaySecurityTests.code(gateway, ["-d", "x", gateway.url("/gw.r")]) != "200" {
                try await Task.sleep(for: .milliseconds(100))
            }
        }
        try await gateway.stop()
        try await daemon.stop()
    }
}

/// notifyd-http over HTTPS (issue 46: tokens and messages no longer cross the network in clear).
@Suite("HTTP gateway: HTTPS (real notifyd, notifyd-http, curl, openssl's certificates)", .timeLimit(.minutes(5)))
struct GatewayTLSTests {
    @Test("with --tls-certificate and --tls-key it serves HTTPS and nothing in clear; its own pages' origin is https; a key others may read is refused")
    func https() async throws {
        let daemon = try await TestDaemon.start()
        let certificates = try TestCertificates()
        chmod(certificates.directory, 0o755)
        for file in [certificates.serverCertificate, certificates.serverKey] { chown(file, TestGateway.uid, TestGateway.uid) }
        chmod(certificates.serverKey, 0o600)
        let gateway = try await TestGateway.start(
            for: daemon, arguments: ["--tls-certificate", certificates.serverCertificate, "--tls-key", certificates.serverKey]
        )
        #expect(gateway.child.standardOutput.text.contains("listening on https://127.0.0.1:"))
        let secure = "https://localhost:\(gateway.port)"
        let tls = ["--cacert", certificates.authority]
        #expect(try await GatewaySecurityTests.code(gateway, tls + ["-d", "over tls", secure + "/gw.tls"]) == "200")
        #expect(try await daemon.notify(["latest", "gw.tls"]).output == "over tls\n")
        #expect(try await GatewaySecurityTests.code(gateway, tls + ["-H", "Origin: \(secure)", "-d", "own page", secure + "/gw.tls"]) == "200")
        #expect(try await GatewaySecurityTests.code(gateway, tls + ["-H", "Origin: http://localhost:\(gateway.port)", "-d", "x", secure + "/gw.tls"]) == "403")
        let clear = try await gateway.curl(["-d", "in clear", "http://127.0.0.1:\(gateway.port)/gw.tls"])
        #expect(clear.status != 0 || !clear.output.contains("\"message\""), "served in clear: \(clear.output)")
        #expect(try await daemon.notify(["latest", "gw.tls"]).output == "own page\n")
        try await gateway.stop()

        chmod(certificates.serverKey, 0o644)
        let command = TestGateway.asGatewayUser([
            Binaries.notifydHTTP, "--listen", "127.0.0.1:0", "--socket", daemon.socketPath, "--allow-anonymous",
            "--tls-certificate", certificates.serverCertificate, "--tls-key", certificates.serverKey,
        ])
        let refused = try ChildProcess(command[0], Array(command.dropFirst()))
        #expect(try await refused.exitStatus() != 0)
        try await refused.standardError.wait("the reason") { $0.contains("TLS key") && $0.contains("mode 644") }
        try await daemon.stop()
    }
}
