import Foundation

/// A certificate authority, and certificates it signed for a NATS server and a client, made with `openssl` (installed
/// by `script/bootstrap --for-tests`) in a temporary directory for one test, and removed with it.
public final class TestCertificates: Sendable {
    public let directory: String
    /// The authority's certificate: what a client that trusts it is given as `tls-ca`.
    public var authority: String { directory + "/ca.pem" }
    /// The server's certificate and key, for `localhost` and 127.0.0.1.
    public var serverCertificate: String { directory + "/server.pem" }
    public var serverKey: String { directory + "/server-key.pem" }
    /// A server certificate of the same authority for another name only (`elsewhere.invalid`).
    public var otherNameCertificate: String { directory + "/other.pem" }
    public var otherNameKey: String { directory + "/other-key.pem" }
    /// A client's certificate and key, for a server that verifies its clients.
    public var clientCertificate: String { directory + "/client.pem" }
    public var clientKey: String { directory + "/client-key.pem" }
    /// Another authority, which signed none of these: a client trusting it must refuse the server.
    public var strangerAuthority: String { directory + "/stranger-ca.pem" }

    /// nats-server's `tls { … }` block for the server certificate (or the other name's). Its handshake timeout is
    /// raised from the server's 2 s: a debug build's BoringSSL on a machine busy with the whole suite can take longer,
    /// and the server then closes mid-handshake (seen in CI as `EOF during handshake`), which is not what a test checks.
    public func serverTLSBlock(otherName: Bool = false, verifyClients: Bool = false) -> String {
        """
        tls {
          cert_file: "\(otherName ? otherNameCertificate : serverCertificate)"
          key_file: "\(otherName ? otherNameKey : serverKey)"
          ca_file: "\(authority)"
          verify: \(verifyClients)
          timeout: 30
        }
        """
    }

    public init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("certs-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
                    "-subj", "/CN=notifyd test authority", "-keyout", "ca-key.pem", "-out", "ca.pem")
        try openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
                    "-subj", "/CN=stranger", "-keyout", "stranger-ca-key.pem", "-out", "stranger-ca.pem")
        try issue("server", names: "DNS:localhost,IP:127.0.0.1", usage: "serverAuth")
        try issue("other", names: "DNS:elsewhere.invalid", usage: "serverAuth")
        try issue("client", names: "DNS:notifyd-client", usage: "clientAuth")
    }

    private func issue(_ name: String, names: String, usage: String) throws {
        try openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj", "/CN=\(name)",
                    "-keyout", "\(name)-key.pem", "-out", "\(name).csr")
        try "subjectAltName=\(names)\nextendedKeyUsage=\(usage)\n".write(toFile: directory + "/\(name).ext", atomically: true, encoding: .utf8)
        try openssl("x509", "-req", "-in", "\(name).csr", "-CA", "ca.pem", "-CAkey", "ca-key.pem", "-CAcreateserial", "-days", "2",
                    "-extfile", "\(name).ext", "-out", "\(name).pem")
    }

    private func openssl(_ arguments: String...) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        process.standardOutput = FileHandle.nullDevice
        let errors = Pipe()
        process.standardError = errors
        try process.run()
        let said = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw NATSServerProcess.Failure(description: "openssl \(arguments.joined(separator: " ")): \(String(decoding: said, as: UTF8.self))")
        }
    }

    deinit {
        try? FileManager.default.removeItem(atPath: directory)
    }
}
