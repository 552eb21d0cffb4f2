import Foundation
public import NIOSSL

/// The gateway's HTTPS: its certificate chain and key, read once at start (`--tls-certificate`, `--tls-key`). With
/// it, every connection is TLS and nothing is served in clear; tokens and messages cross the network encrypted.
public struct GatewayTLS: Sendable {
    /// The context each connection's handshake uses.
    public let context: NIOSSLContext

    /// Reads the PEM certificate chain at `certificate` and the PEM key at `key`: a key that others may read, or
    /// group members or others change, is refused as a token file is.
    public init(certificate: String, key: String) throws {
        try TokenTable.checkPrivate(key, what: "TLS key")
        do {
            var configuration = TLSConfiguration.makeServerConfiguration(
                certificateChain: try NIOSSLCertificate.fromPEMFile(certificate).map { .certificate($0) },
                privateKey: .privateKey(try NIOSSLPrivateKey(file: key, format: .pem))
            )
            configuration.minimumTLSVersion = .tlsv12
            context = try NIOSSLContext(configuration: configuration)
        } catch {
            throw TokenTable.Problem("cannot use --tls-certificate \(certificate) with --tls-key \(key): \(error)")
        }
    }
}
