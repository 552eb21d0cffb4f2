import Foundation
import NATSClient
import NATSTestSupport
import NIOCore
import NotifyBus
import Testing

/// Real `notifyd` daemons on a secured real `nats-server` (issue 37): TLS with the server's certificate verified,
/// a login from a file; a refused login is in the journal, on `STATUS=` and in `notify stats`, local traffic goes
/// on, and a reload with the right secret connects.
@Suite("Several hosts through a secured NATS (real nats-server and notifyd)", .timeLimit(.minutes(10)))
struct FederationSecurityTests {
    /// A file holding `text`, readable by its owner only.
    static func secret(_ text: String, at path: String) {
        _ = FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600])
    }

    @Test("two hosts over TLS (a server that takes no plain text) with a password: a message crosses once, with its host; no secret in the log")
    func tlsAndPassword() async throws {
        let certificates = try TestCertificates()
        let nats = try await NATSServerProcess.start(
            configuration: """
                \(certificates.serverTLSBlock())
                authorization { timeout: 30, user: "fleet", password: "correct horse" }
                """
        )
        defer { nats.stop() }
        let directory = try TemporaryDirectory()
        Self.secret("correct horse\n", at: directory.path + "/password")
        let login = [
            "--nats", "tls://127.0.0.1:\(nats.port)", "--nats-tls-ca", certificates.authority,
            "--nats-user", "fleet", "--nats-password-file", directory.path + "/password",
        ]
        let alpha = try await TestDaemon.start(arguments: ["--host-name", "alpha"] + login)
        let beta = try await TestDaemon.start(arguments: ["--host-name", "beta"] + login)
        for daemon in [alpha, beta] {
            try await daemon.fleetLog.wait("a daemon to join NATS") { $0.contains("read the latest messages of other hosts") }
        }
        let onBeta = try await beta.client()
        let subscription = try await onBeta.subscribe(to: [TopicPattern("secure.>")])
        #expect(try await alpha.notify(["send", "secure.backup", "done"]).status == 0)
        #expect(try await alpha.notify(["send", "secure.end", "end"]).status == 0)
        let received = try await FederationTests.collect(subscription, until: "secure.end")
        #expect(received.map { "\($0.topic.name) \($0.text ?? "") \($0.host ?? "-")" } == ["secure.backup done alpha", "secure.end end alpha"])
        let stats = try await FederationTests.stats(of: onBeta) { $0["nats_connected"] == 1 }
        #expect(stats["nats_connected"] == 1 && stats["nats_auth_failed"] == 0)
        #expect(!alpha.log.contains("correct horse") && !beta.log.contains("correct horse"), "no secret in the log")
        #expect(!alpha.log.contains("in plain text"), "over TLS, no warning")
        await onBeta.close()
        _ = try await alpha.stop()
        _ = try await beta.stop()
    }

    @Test("without the authority, a TLS server is refused and the log says why; nats:// to a TLS-only server takes TLS, never plain text")
    func certificateChecks() async throws {
        let certificates = try TestCertificates()
        let nats = try await NATSServerProcess.start(
            configuration: certificates.serverTLSBlock()
        )
        defer { nats.stop() }
        let untrusting = try await TestDaemon.start(arguments: ["--host-name", "alpha", "--nats", "tls://127.0.0.1:\(nats.port)"])
        try await untrusting.fleetLog.wait("the refused certificate in the log") {
            $0.contains("cannot reach NATS at tls://127.0.0.1:\(nats.port)") && $0.contains("CERTIFICATE_VERIFY_FAILED")
        }
        #expect(try await untrusting.notify(["send", "local.x", "fine"]).status == 0, "local traffic goes on")
        _ = try await untrusting.stop()

        // nats:// names no TLS; the server's INFO requires it, so TLS it is (a plain-text CONNECT would be refused).
        let alpha = try await TestDaemon.start(arguments: ["--host-name", "alpha", "--nats", nats.url, "--nats-tls-ca", certificates.authority])
        let beta = try await TestDaemon.start(arguments: ["--host-name", "beta", "--nats", nats.url, "--nats-tls-ca", certificates.authority])
        for daemon in [alpha, beta] {
            try await daemon.fleetLog.wait("a daemon to join NATS") { $0.contains("read the latest messages of other hosts") }
        }
        let onBeta = try await beta.client()
        let subscription = try await onBeta.subscribe(to: [TopicPattern("upgraded.>")])
        #expect(try await alpha.notify(["send", "upgraded.end", "over TLS"]).status == 0)
        #expect(try await FederationTests.collect(subscription, until: "upgraded.end").map { $0.host } == ["alpha"])
        await onBeta.close()
        _ = try await alpha.stop()
        _ = try await beta.stop()
    }

    @Test("a secret file others may read: notifyd-fleet does not start (exit 78) and says why; notifyd names where the NATS options went")
    func openSecretFile() async throws {
        let directory = try TemporaryDirectory()
        let token = directory.path + "/token"
        _ = FileManager.default.createFile(atPath: token, contents: Data("t0ken\n".utf8), attributes: [.posixPermissions: 0o644])
        let refused = try ChildProcess(
            Binaries.notifydFleet,
            ["--socket", directory.path + "/s", "--config", "/dev/null", "--nats", "nats://127.0.0.1:1", "--nats-token-file", token]
        )
        #expect(try await refused.exitStatus() == 78)
        try await refused.standardError.wait("the reason") {
            $0.contains("--nats-token-file") && $0.contains("group or others may read it (mode 644)") && $0.contains("chmod 600")
        }
        #expect(!refused.standardError.text.contains("t0ken"))

        // The daemon of this release has no NATS options: it says where they went, and starts nothing.
        let daemon = try ChildProcess(
            Binaries.notifyd,
            ["--socket", directory.path + "/s", "--state-dir", directory.path + "/state", "--config", "/dev/null", "--nats", "nats://127.0.0.1:1"]
        )
        #expect(try await daemon.exitStatus() == 64)
        try await daemon.standardError.wait("the sentence") { $0.contains("--nats is notifyd-fleet's now") && $0.contains("Moving a fleet") }
        #expect(!FileManager.default.fileExists(atPath: directory.path + "/s"), "nothing started")
    }

    @Test("a wrong password: journal event, STATUS=, nats_auth_failed; local traffic goes on; a reload with the right one connects")
    func refusedThenFixed() async throws {
        let certificates = try TestCertificates()
        let nats = try await NATSServerProcess.start(
            configuration: """
                \(certificates.serverTLSBlock())
                authorization { timeout: 30, user: "fleet", password: "right" }
                """
        )
        defer { nats.stop() }
        let directory = try TemporaryDirectory()
        let password = directory.path + "/password"
        Self.secret("wrong\n", at: password)
        _ = FileManager.default.createFile(
            atPath: directory.path + "/notifyd.conf",
            contents: Data(
                "[nats]\nservers = \(nats.url)\nhost-name = alpha\nuser = fleet\npassword-file = \(password)\ntls-ca = \(certificates.authority)\n".utf8
            )
        )
        let listener = try NotifySocketListener(path: directory.path + "/notify.sock")
        let alpha = try await TestDaemon.start(in: directory, environment: SystemdIntegrationTests.environment(["NOTIFY_SOCKET": listener.path]))
        try await alpha.fleetLog.wait("the refused login in the log") {
            $0.contains("refused the login (user fleet with a password)") && $0.contains("Authorization Violation")
        }
        #expect(!alpha.log.contains("wrong"), "the password is not in the log")
        _ = try await listener.wait(for: "a STATUS= saying the login was refused") {
            field("STATUS", in: $0)?.contains("NATS LOGIN REFUSED by \(nats.url)") == true
        }
        let client = try await alpha.client()
        let refused = try await FederationTests.stats(of: client) { $0["nats_auth_failed"] ?? 0 >= 1 }
        #expect(refused["nats_auth_failed"] ?? 0 >= 1 && refused["nats_connected"] == 0, "\(refused)")
        // Local traffic goes on.
        #expect(try await alpha.notify(["send", "local.status", "fine"]).status == 0)
        #expect(try await alpha.notify(["latest", "local.status"]).output.contains("fine"))

        Self.secret("right\n", at: password)
        alpha.fleet!.signal(SIGHUP)
        try await alpha.fleetLog.wait("the reload and a login") {
            $0.contains("configuration reloaded") && $0.contains("connected to NATS at \(nats.url) as host alpha")
        }
        try await FederationTests.waitForCounter("nats_connected", toReach: 1, on: client)
        _ = try await listener.wait(for: "a STATUS= naming the server") {
            field("STATUS", in: $0)?.hasPrefix("NATS \(nats.url): ") == true
        }
        await client.close()
        _ = try await alpha.stop()
    }

    @Test("a password for a nats:// server that offers no TLS is never sent: no connection, and the journal says why")
    func passwordNeedsTLS() async throws {
        let nats = try await NATSServerProcess.start(configuration: #"authorization { timeout: 30, user: "fleet", password: "right" }"#)
        defer { nats.stop() }
        let directory = try TemporaryDirectory()
        Self.secret("right\n", at: directory.path + "/password")
        let alpha = try await TestDaemon.start(arguments: [
            "--host-name", "alpha", "--nats", nats.url, "--nats-user", "fleet", "--nats-password-file", directory.path + "/password",
        ])
        try await alpha.fleetLog.wait("the refusal in the log") {
            $0.contains("cannot reach NATS at \(nats.url)") && $0.contains("offers no TLS, and a password is given: not connecting in plain text")
        }
        // The password is right: had it been sent, the server would have taken the login.
        let client = try await alpha.client()
        let stats = try await FederationTests.stats(of: client) { $0["nats_connects"] != nil }
        #expect(stats["nats_connected"] == 0 && stats["nats_connects"] == 0 && stats["nats_auth_failed"] == 0)
        #expect(!alpha.log.contains("right\n") && !alpha.log.contains("password right"))
        #expect(try await alpha.notify(["send", "local.x", "fine"]).status == 0, "local traffic goes on")
        await client.close()
        _ = try await alpha.stop()
    }

    @Test("two hosts log in with NKeys made for the test, each its own seed file; a seed the server does not know is a refused login")
    func nkeyLogins() async throws {
        let alphaSeed = try NKeySeed(kind: .user, privateKey: (0..<32).map { _ in UInt8.random(in: 0...255) })
        let betaSeed = try NKeySeed(kind: .user, privateKey: (0..<32).map { _ in UInt8.random(in: 0...255) })
        let stranger = try NKeySeed(kind: .user, privateKey: (0..<32).map { _ in UInt8.random(in: 0...255) })
        let nats = try await NATSServerProcess.start(
            configuration: #"authorization { timeout: 30, users = [ { nkey: "\#(alphaSeed.publicKey)" }, { nkey: "\#(betaSeed.publicKey)" } ] }"#
        )
        defer { nats.stop() }
        let directory = try TemporaryDirectory()
        var daemons: [TestDaemon] = []
        for (name, seed) in [("alpha", alphaSeed), ("beta", betaSeed)] {
            let file = directory.path + "/\(name).nk"
            Self.secret(seed.text + "\n", at: file)
            daemons.append(try await TestDaemon.start(arguments: ["--host-name", name, "--nats", nats.url, "--nats-nkey-file", file]))
        }
        for daemon in daemons {
            try await daemon.fleetLog.wait("a daemon to join NATS") { $0.contains("read the latest messages of other hosts") }
        }
        let onBeta = try await daemons[1].client()
        let subscription = try await onBeta.subscribe(to: [TopicPattern("nkey.>")])
        #expect(try await daemons[0].notify(["send", "nkey.end", "signed"]).status == 0)
        #expect(try await FederationTests.collect(subscription, until: "nkey.end").map { $0.host } == ["alpha"])
        #expect(!daemons[0].log.contains("in plain text"), "an NKey login sends only a signature")

        let file = directory.path + "/stranger.nk"
        Self.secret(stranger.text + "\n", at: file)
        let refused = try await TestDaemon.start(arguments: ["--host-name", "gamma", "--nats", nats.url, "--nats-nkey-file", file])
        try await refused.fleetLog.wait("the refused login") { $0.contains("refused the login (NKey \(stranger.publicKey))") }
        #expect(!refused.log.contains(stranger.text), "the seed is in no log")
        await onBeta.close()
        for daemon in daemons + [refused] { try await daemon.stop() }
    }
}
