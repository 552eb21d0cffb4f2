import Foundation
import NIOCore
import NATSTestSupport
import Testing

@testable import NATSClient

/// TLS and every login nats-server takes from a client, against a real nats-server configured for each (certificates
/// made with openssl for the test): what should connect does and carries a message; what should not fails with a
/// sentence, and a refused login is told apart; nothing falls back to plain text.
@Suite("NATS TLS and logins (real nats-server)", .timeLimit(.minutes(3)))
struct NATSLoginTests {
    /// Connects with `tls` and `credentials`, and checks a message crosses the connection and back.
    /// Connects to `server`, subscribes, publishes and gets the message back; a failure says what the server logged.
    static func roundTrip(_ server: NATSServerProcess, host: String = "127.0.0.1", tls: NATSTLSSettings = NATSTLSSettings(), credentials: NATSCredentials? = nil) async throws {
        do {
            try await roundTrip(server.port, host: host, tls: tls, credentials: credentials)
        } catch {
            throw NATSServerProcess.Failure(description: "\(error); the server's last lines:\n\(server.lastLines())")
        }
    }

    static func roundTrip(_ port: Int, host: String, tls: NATSTLSSettings, credentials: NATSCredentials?) async throws {
        // A TLS handshake and login may take longer than the 5 s a service allows on a runner running every suite.
        let connection = try await NATSConnection.connect(host: host, port: port, name: "login-test", tls: tls, credentials: credentials, timeout: .seconds(60))
        let messages = try await connection.subscribe(to: "login.test")
        try await connection.publish(ByteBuffer(string: "hello"), to: "login.test")
        var iterator = messages.makeAsyncIterator()
        let message = try #require(try await iterator.next())
        #expect(message.payload == ByteBuffer(string: "hello"))
        await connection.close()
    }

    /// The error connecting with `tls` and `credentials` fails with.
    static func failure(_ port: Int, host: String = "127.0.0.1", tls: NATSTLSSettings = NATSTLSSettings(), credentials: NATSCredentials? = nil) async -> NATSError? {
        do {
            let connection = try await NATSConnection.connect(host: host, port: port, name: "login-test", tls: tls, credentials: credentials, timeout: .seconds(60))
            await connection.close()
            return nil
        } catch let error as NATSError {
            return error
        } catch {
            return NATSError("not a NATSError: \(error)")
        }
    }

    @Test("tls:// against a server with TLS, trusting its authority: connected by address and by name")
    func tlsConnects() async throws {
        let certificates = try TestCertificates()
        let server = try await NATSServerProcess.start(configuration: certificates.serverTLSBlock())
        defer { server.stop() }
        let tls = NATSTLSSettings(isRequired: true, certificateAuthorityFile: certificates.authority)
        try await Self.roundTrip(server, tls: tls)
        try await Self.roundTrip(server, host: "localhost", tls: tls)
        // nats:// to a server whose INFO says tls_required: TLS all the same.
        try await Self.roundTrip(server, tls: NATSTLSSettings(certificateAuthorityFile: certificates.authority))
    }

    @Test("a certificate of another authority, of another name, or TLS asked of a server without it: refused, never plain text")
    func tlsRefusals() async throws {
        let certificates = try TestCertificates()
        let server = try await NATSServerProcess.start(configuration: certificates.serverTLSBlock())
        defer { server.stop() }
        let stranger = await Self.failure(server.port, tls: NATSTLSSettings(isRequired: true, certificateAuthorityFile: certificates.strangerAuthority))
        #expect(stranger?.description.contains("CERTIFICATE_VERIFY_FAILED") == true, "\(String(describing: stranger))")
        let systemStore = await Self.failure(server.port, tls: NATSTLSSettings(isRequired: true))
        #expect(systemStore?.description.contains("CERTIFICATE_VERIFY_FAILED") == true, "a test authority is in no system store: \(String(describing: systemStore))")

        let otherName = try await NATSServerProcess.start(configuration: certificates.serverTLSBlock(otherName: true))
        defer { otherName.stop() }
        let mismatch = await Self.failure(otherName.port, host: "localhost", tls: NATSTLSSettings(isRequired: true, certificateAuthorityFile: certificates.authority))
        #expect(mismatch?.description.contains("TLS with the NATS server failed") == true && mismatch?.description.contains("localhost") == true, "a certificate for elsewhere.invalid does not vouch for localhost: \(String(describing: mismatch))")

        let plain = try await NATSServerProcess.start()
        defer { plain.stop() }
        let noTLS = await Self.failure(plain.port, tls: NATSTLSSettings(isRequired: true, certificateAuthorityFile: certificates.authority))
        #expect(noTLS?.description.contains("offers no TLS") == true, "\(String(describing: noTLS))")
        #expect(noTLS?.isAuthorizationFailure == false)
    }

    @Test("a server that verifies its clients takes one with a certificate of its authority, and no other")
    func clientCertificate() async throws {
        let certificates = try TestCertificates()
        let server = try await NATSServerProcess.start(configuration: certificates.serverTLSBlock(verifyClients: true))
        defer { server.stop() }
        var tls = NATSTLSSettings(isRequired: true, certificateAuthorityFile: certificates.authority)
        let withoutCertificate = await Self.failure(server.port, tls: tls)
        #expect(withoutCertificate?.description.contains("TLS") == true, "no client certificate: \(String(describing: withoutCertificate))")
        tls.certificateFile = certificates.clientCertificate
        tls.keyFile = certificates.clientKey
        try await Self.roundTrip(server, tls: tls)
        tls.keyFile = nil
        #expect(await Self.failure(server.port, tls: tls)?.description.contains("both") == true)
    }

    @Test("user and password, token, NKey: the right one logs in, a wrong one is a refused login")
    func logins() async throws {
        let passwords = try await NATSServerProcess.start(
            configuration: #"authorization { timeout: 30, users = [ { user: "fleet", password: "s3cret \"quoted\"" }, { user: "other", password: "x" } ] }"#
        )
        defer { passwords.stop() }
        try await Self.roundTrip(passwords, credentials: .userPassword(user: "fleet", password: #"s3cret "quoted""#))
        let wrongPassword = await Self.failure(passwords.port, credentials: .userPassword(user: "fleet", password: "guess"))
        #expect(wrongPassword?.isAuthorizationFailure == true, "\(String(describing: wrongPassword))")
        #expect(await Self.failure(passwords.port)?.isAuthorizationFailure == true, "no credentials at all")

        let tokens = try await NATSServerProcess.start(configuration: #"authorization { timeout: 30, token: "t0ken-of-the-fleet" }"#)
        defer { tokens.stop() }
        try await Self.roundTrip(tokens, credentials: .token("t0ken-of-the-fleet"))
        #expect(await Self.failure(tokens.port, credentials: .token("other"))?.isAuthorizationFailure == true)

        let seed = try NKeySeed(parsing: NATSCredentialsTests.seed)
        let stranger = try NKeySeed(kind: .user, privateKey: [UInt8](repeating: 7, count: 32))
        let nkeys = try await NATSServerProcess.start(configuration: #"authorization { timeout: 30, users = [ { nkey: "\#(seed.publicKey)" } ] }"#)
        defer { nkeys.stop() }
        try await Self.roundTrip(nkeys, credentials: .nkey(seed))
        #expect(await Self.failure(nkeys.port, credentials: .nkey(stranger))?.isAuthorizationFailure == true)
    }

    @Test("a .creds file: its user, signed by an account the operator trusts, logs in; another account's user, or an expired one, is refused")
    func credsFile() async throws {
        let trusted = TestOperator()
        let server = try await NATSServerProcess.start(configuration: trusted.serverConfiguration)
        defer { server.stop() }
        try await Self.roundTrip(server, credentials: try NATSCredentials(credsFile: trusted.creds()))
        let stranger = TestOperator()
        let untrusted = await Self.failure(server.port, credentials: try NATSCredentials(credsFile: stranger.creds()))
        #expect(untrusted?.isAuthorizationFailure == true, "\(String(describing: untrusted))")
        let expired = await Self.failure(server.port, credentials: try NATSCredentials(credsFile: trusted.creds(expiresAt: Int(Date().timeIntervalSince1970) - 60)))
        #expect(expired?.isAuthorizationFailure == true, "\(String(describing: expired))")
    }

    @Test("TLS and a password together, as a managed NATS asks")
    func tlsAndPassword() async throws {
        let certificates = try TestCertificates()
        let server = try await NATSServerProcess.start(configuration: certificates.serverTLSBlock() + "\n" + #"authorization { timeout: 30, user: "fleet", password: "pw" }"#)
        defer { server.stop() }
        try await Self.roundTrip(
            server,
            tls: NATSTLSSettings(isRequired: true, certificateAuthorityFile: certificates.authority),
            credentials: .userPassword(user: "fleet", password: "pw")
        )
    }
}
