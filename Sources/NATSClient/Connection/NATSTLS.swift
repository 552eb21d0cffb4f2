import NIOCore
import NIOSSL

/// How a connection to a NATS server uses TLS.
///
/// TLS is used when the URL asked for it (`tls://`, ``isRequired``) or the server's `INFO` says `tls_required`; a
/// connection that asked for it and meets a server that offers none fails: it never falls back to plain text. The
/// server's certificate is verified against the system's store, or ``certificateAuthorityFile`` when given, and by
/// the host name the client connected to.
public struct NATSTLSSettings: Sendable, Equatable {
    /// Whether the client requires TLS whatever the server says (a `tls://` URL).
    public var isRequired: Bool
    /// Why TLS is required, for the sentence that refuses a server offering none.
    public var requiredBecause = "the URL asks for it (tls://)"
    /// PEM file of the certificate authorities to trust instead of the system's.
    public var certificateAuthorityFile: String?
    /// PEM file of the client's own certificate (chain), for a server that verifies its clients.
    public var certificateFile: String?
    /// PEM file of the key of ``certificateFile``.
    public var keyFile: String?

    public init(isRequired: Bool = false, certificateAuthorityFile: String? = nil, certificateFile: String? = nil, keyFile: String? = nil) {
        self.isRequired = isRequired
        self.certificateAuthorityFile = certificateAuthorityFile
        self.certificateFile = certificateFile
        self.keyFile = keyFile
    }

    /// Reads the files as a connection would, so that a setting that cannot work is refused when it is given rather
    /// than at each connection.
    public func check() throws(NATSError) {
        _ = try makeHandler(host: "localhost")
    }

    /// The TLS client handler for a connection to `host`, its files read now (so a file that changed is read again
    /// on each connection).
    func makeHandler(host: String) throws(NATSError) -> NIOSSLClientHandler {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.minimumTLSVersion = .tlsv12
        do {
            if let certificateAuthorityFile {
                configuration.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(certificateAuthorityFile))
            }
        } catch {
            throw NATSError("cannot read the certificate authorities in \(certificateAuthorityFile ?? ""): \(error)")
        }
        switch (certificateFile, keyFile) {
        case (let certificate?, let key?):
            do {
                configuration.certificateChain = try NIOSSLCertificate.fromPEMFile(certificate).map { .certificate($0) }
            } catch {
                throw NATSError("cannot read the client certificate in \(certificate): \(error)")
            }
            do {
                configuration.privateKey = .privateKey(try NIOSSLPrivateKey(file: key, format: .pem))
            } catch {
                throw NATSError("cannot read the client key in \(key): \(error)")
            }
        case (nil, nil):
            break
        default:
            throw NATSError("a client certificate needs both its certificate file and its key file")
        }
        do {
            let context = try NIOSSLContext(configuration: configuration)
            // An address is verified against the certificate's IP entries; SNI carries names only.
            let isAddress = (try? SocketAddress(ipAddress: host, port: 0)) != nil
            return try NIOSSLClientHandler(context: context, serverHostname: isAddress ? nil : host)
        } catch {
            throw NATSError("cannot set up TLS for \(host): \(error)")
        }
    }
}
