import Foundation
import NATSClient
import NATSTestSupport
import Testing

@testable import NotifyFleet

/// The NATS bridge's TLS and login settings (issue 37): secrets only from files their owner alone may read, one way
/// to log in, errors that name the option or line and never a secret (no server; the logins themselves are in
/// NATSLoginTests and FederationSecurityTests).
@Suite("NATS bridge TLS and login settings", .timeLimit(.minutes(3)))
struct BridgeSecurityTests {
    typealias File = TemporaryFile
    static let seed = "SUACSSL3UAHUDXKFSNVUZRF5UHPMWZ6BFDTJ7M6USDXIEDNPPQYYYCU3VY"

    /// A file holding `text`, with `mode`.
    static func secret(_ text: String, mode: Int16 = 0o600) -> File {
        let file = File(text)
        chmod(file.path, mode_t(mode))
        return file
    }

    static func load(_ overrides: FleetSettings.Overrides, file: String = "/dev/null") async throws -> BridgeSettings {
        try FleetSettings.load(overrides: overrides, configurationFile: file).bridge
    }

    @Test("tls:// servers, a password from its file, and the summary names the files but no secret")
    func commandLine() async throws {
        let password = Self.secret("pässword with spaces\n")
        var overrides = FleetSettings.Overrides()
        overrides.servers = ["tls://nats.example:4443", "nats://b"]
        overrides.security = BridgeSecurity.Options(user: "fleet", passwordFile: password.path)
        let bridge = try await Self.load(overrides)
        #expect(bridge.servers.map(\.description) == ["tls://nats.example:4443", "nats://b:4222"])
        #expect(bridge.tls(for: bridge.servers[0]).isRequired && bridge.tls(for: bridge.servers[1]).isRequired, "a password means TLS")
        #expect(bridge.tls(for: bridge.servers[1]).requiredBecause == "a password is given")
        #expect(bridge.security.credentials == .userPassword(user: "fleet", password: "pässword with spaces"))
        #expect(bridge.summary.contains("password-file = \(password.path)") && bridge.summary.contains("user = fleet"))
        #expect(!bridge.summary.contains("pässword"), "the summary never prints a secret")
    }

    @Test("[nats] keys for each login: token, NKey, .creds; the command line wins")
    func section() async throws {
        let token = Self.secret("t0ken\n")
        let nkey = Self.secret(Self.seed + "\n")
        let creds = Self.secret(
            "-----BEGIN NATS USER JWT-----\naaa.bbb.ccc\n------END NATS USER JWT------\n\n-----BEGIN USER NKEY SEED-----\n\(Self.seed)\n------END USER NKEY SEED------\n"
        )
        let withToken = File("[nats]\nservers = a\ntoken-file = \(token.path)\n")
        #expect(try await Self.load(FleetSettings.Overrides(), file: withToken.path).security.credentials == .token("t0ken"))
        let withNKey = File("[nats]\nservers = a\nnkey-file = \(nkey.path)\n")
        #expect(try await Self.load(FleetSettings.Overrides(), file: withNKey.path).security.credentials == .nkey(try NKeySeed(parsing: Self.seed)))
        let withCreds = File("[nats]\nservers = a\ncredentials = \(creds.path)\n")
        let read = try await Self.load(FleetSettings.Overrides(), file: withCreds.path).security.credentials
        #expect(read == .userJWT(jwt: "aaa.bbb.ccc", seed: try NKeySeed(parsing: Self.seed)))
        var overrides = FleetSettings.Overrides()
        overrides.security.tokenFile = token.path
        let both = try await Self.load(overrides, file: withToken.path)
        #expect(both.security.credentials == .token("t0ken"))
    }

    @Test("a secret file others may read is refused with a sentence saying why, naming the option or the line")
    func readableByOthers() async throws {
        let open = Self.secret("t0ken", mode: 0o644)
        let groupReadable = Self.secret("t0ken", mode: 0o640)
        for file in [open, groupReadable] {
            var overrides = FleetSettings.Overrides()
            overrides.servers = ["a"]
            overrides.security.tokenFile = file.path
            await #expect {
                _ = try await Self.load(overrides)
            } throws: { error in
                let text = "\(error)"
                return text.contains("--nats-token-file") && text.contains("group or others may read it") && text.contains("chmod 600")
                    && !text.contains("t0ken")
            }
        }
        let othersMayRead = Self.secret(Self.seed, mode: 0o604)
        let section = File("[nats]\nservers = a\nnkey-file = \(othersMayRead.path)\n")
        await #expect {
            _ = try await Self.load(FleetSettings.Overrides(), file: section.path)
        } throws: { error in
            "\(error)".contains("line 3") && "\(error)".contains("group or others") && !"\(error)".contains(Self.seed)
        }
    }

    @Test("what cannot be used is refused", arguments: [
        ("user = fleet\n", "a user needs its password"),
        ("password-file = PASSWORD\n", "a password needs its user"),
        ("user = fleet\npassword-file = PASSWORD\ntoken-file = PASSWORD\n", "one way to log in"),
        ("nkey-file = PASSWORD\n", "NKey seed is 58 characters"),
        ("credentials = PASSWORD\n", "no user JWT"),
        ("token-file = /nonexistent/token\n", "cannot be read"),
        ("tls-cert = /nonexistent/cert.pem\n", "needs both tls-cert and tls-key"),
        ("tls-ca = /nonexistent/ca.pem\n", "certificate authorities"),
        ("tls-ca = PASSWORD\n", "certificate authorities"),
    ])
    func refused(lines: String, problem: String) async throws {
        let password = Self.secret("not-a-seed")
        let file = File("[nats]\nservers = a\n" + lines.replacingOccurrences(of: "PASSWORD", with: password.path))
        await #expect {
            _ = try await Self.load(FleetSettings.Overrides(), file: file.path)
        } throws: { error in
            "\(error)".contains(problem) && !"\(error)".contains("not-a-seed")
        }
    }

    @Test("a TLS file replaced under the same name is a change (a reload takes a new connection); the same contents are not")
    func tlsFilesChange() async throws {
        let first = try TestCertificates()
        let second = try TestCertificates()
        let authority = File("")
        try FileManager.default.removeItem(atPath: authority.path)
        try FileManager.default.copyItem(atPath: first.authority, toPath: authority.path)
        var overrides = FleetSettings.Overrides()
        overrides.servers = ["tls://a"]
        overrides.security.tlsCA = authority.path
        let before = try await Self.load(overrides)
        #expect(try await Self.load(overrides) == before, "read again, unchanged")
        try FileManager.default.removeItem(atPath: authority.path)
        try FileManager.default.copyItem(atPath: second.authority, toPath: authority.path)
        #expect(try await Self.load(overrides) != before, "another authority under the same name")
    }

    @Test("credentials in a URL are refused, saying where they go instead, and the sentence holds no secret")
    func urlCredentials() async throws {
        var overrides = FleetSettings.Overrides()
        overrides.servers = ["nats://fleet:s3cret@a:4222"]
        await #expect {
            _ = try await Self.load(overrides)
        } throws: { error in
            "\(error)".contains("--nats-password-file") && "\(error)".contains("nats://…@a:4222") && !"\(error)".contains("s3cret")
                && !"\(error)".contains("fleet")
        }
    }

    @Test("an authority, a client certificate, a password or a token makes TLS required for nats:// too; an NKey or none does not")
    func tlsRequiredBySettings() async throws {
        let certificates = try TestCertificates()
        let password = Self.secret("pw\n")
        let token = Self.secret("t0ken\n")
        let seed = Self.secret(Self.seed + "\n")
        let cases: [(BridgeSecurity.Options, String?)] = [
            (BridgeSecurity.Options(), nil),
            (BridgeSecurity.Options(nkeyFile: seed.path), nil),
            (BridgeSecurity.Options(tlsCA: certificates.authority), "tls-ca is given"),
            (BridgeSecurity.Options(tlsCert: certificates.clientCertificate, tlsKey: certificates.clientKey), "a client certificate (tls-cert) is given"),
            (BridgeSecurity.Options(user: "fleet", passwordFile: password.path), "a password is given"),
            (BridgeSecurity.Options(tokenFile: token.path), "a token is given"),
        ]
        for (options, reason) in cases {
            var overrides = FleetSettings.Overrides()
            overrides.servers = ["nats://a:4222"]
            overrides.security = options
            let tls = try await Self.load(overrides).tls(for: try BridgeSettings.Server(parsing: "nats://a:4222"))
            #expect(tls.isRequired == (reason != nil), "\(options)")
            if let reason { #expect(tls.requiredBecause == reason) }
        }
    }

    @Test("a login option without a server is an error")
    func withoutServer() async throws {
        var overrides = FleetSettings.Overrides()
        overrides.security.user = "fleet"
        #expect(throws: (any Error).self) { _ = try FleetSettings.load(overrides: overrides, configurationFile: "/dev/null") }
    }
}
