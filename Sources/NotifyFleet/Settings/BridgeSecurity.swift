import NATSClient
import ConfigurationFiles

/// The NATS bridge's TLS and login: from the command line (`--nats-tls-ca`, `--nats-user`, …) or the file's
/// `[nats]` section (`tls-ca`, `user`, …). Secrets come from files only (``SecretFile``), read each time the settings
/// are (at start and on SIGHUP), so a rotated password or `.creds` file is taken by a reload.
package struct BridgeSecurity: Sendable, Equatable {
    /// The paths and names given; what ``resolve(_:section:path:)`` reads.
    package struct Options: Sendable, Equatable {
        package var tlsCA: String?
        package var tlsCert: String?
        package var tlsKey: String?
        package var user: String?
        package var passwordFile: String?
        package var tokenFile: String?
        package var nkeyFile: String?
        package var credentials: String?

        package init(
            tlsCA: String? = nil, tlsCert: String? = nil, tlsKey: String? = nil, user: String? = nil, passwordFile: String? = nil,
            tokenFile: String? = nil, nkeyFile: String? = nil, credentials: String? = nil
        ) {
            self.tlsCA = tlsCA
            self.tlsCert = tlsCert
            self.tlsKey = tlsKey
            self.user = user
            self.passwordFile = passwordFile
            self.tokenFile = tokenFile
            self.nkeyFile = nkeyFile
            self.credentials = credentials
        }

        package var isEmpty: Bool { self == Options() }
    }

    var options = Options()
    /// TLS as the options set it; whether a server requires it comes from its URL (`tls://`).
    var tls = NATSTLSSettings()
    var credentials: NATSCredentials?
    /// A digest of the TLS files' contents as read now: a certificate replaced under the same name is a change too,
    /// which a reload applies with a new connection. (A hash of this process's: compared, never kept.)
    var tlsFilesDigest = 0

    /// The `[nats]` keys, each the command line's option without `--nats-`.
    static let keys: [(key: String, option: String)] = [
        ("tls-ca", "--nats-tls-ca"), ("tls-cert", "--nats-tls-cert"), ("tls-key", "--nats-tls-key"), ("user", "--nats-user"),
        ("password-file", "--nats-password-file"), ("token-file", "--nats-token-file"), ("nkey-file", "--nats-nkey-file"),
        ("credentials", "--nats-credentials"),
    ]

    /// The settings of `commandLine`, each value not given there taken from `section`; the files are checked and the
    /// secrets read now. An error names the option or key, and never a secret.
    static func resolve(
        _ commandLine: Options,
        section: [String: (text: String, line: Int)],
        path: String
    ) throws -> BridgeSecurity {
        var options = commandLine
        var fromFile: Set<String> = []
        func take(_ key: String, _ field: WritableKeyPath<Options, String?>) {
            if options[keyPath: field] == nil, let text = section[key]?.text {
                options[keyPath: field] = text
                fromFile.insert(key)
            }
        }
        take("tls-ca", \.tlsCA)
        take("tls-cert", \.tlsCert)
        take("tls-key", \.tlsKey)
        take("user", \.user)
        take("password-file", \.passwordFile)
        take("token-file", \.tokenFile)
        take("nkey-file", \.nkeyFile)
        take("credentials", \.credentials)
        func failure(_ key: String, _ problem: String) -> ConfigurationError {
            let option = keys.first { $0.key == key }?.option ?? key
            return fromFile.contains(key)
                ? ConfigurationError(path: path, line: section[key]?.line, problem: "[nats] \(key): \(problem)")
                : ConfigurationError(path: "command line", line: nil, problem: "\(option): \(problem)")
        }
        var security = BridgeSecurity(options: options)
        let logins = [("password-file", options.passwordFile), ("token-file", options.tokenFile), ("nkey-file", options.nkeyFile), ("credentials", options.credentials)]
            .filter { $0.1 != nil }.map(\.0)
        if logins.count > 1 {
            throw failure(logins[1], "give one way to log in to NATS, not \(logins.joined(separator: " and "))")
        }
        if options.user != nil, options.passwordFile == nil {
            throw failure("user", "a user needs its password, from a file (password-file, or --nats-password-file)")
        }
        if let file = options.passwordFile {
            guard let user = options.user else {
                throw failure("password-file", "a password needs its user (user, or --nats-user)")
            }
            guard !user.isEmpty, !user.contains(where: { $0.isWhitespace || $0.isNewline }) else {
                throw failure("user", "a NATS user name has no spaces")
            }
            do {
                security.credentials = .userPassword(user: user, password: try SecretFile.read(file, holding: "NATS password"))
            } catch { throw failure("password-file", "\(error)") }
        }
        if let file = options.tokenFile {
            do {
                security.credentials = .token(try SecretFile.read(file, holding: "NATS token"))
            } catch { throw failure("token-file", "\(error)") }
        }
        if let file = options.nkeyFile {
            do {
                security.credentials = .nkey(try NKeySeed(parsing: try SecretFile.read(file, holding: "NKey seed")))
            } catch { throw failure("nkey-file", "\(error)") }
        }
        if let file = options.credentials {
            do {
                security.credentials = try NATSCredentials(credsFile: try SecretFile.read(file, holding: "NATS credentials"))
            } catch { throw failure("credentials", "\(error)") }
        }
        if (options.tlsCert == nil) != (options.tlsKey == nil) {
            throw failure(options.tlsCert == nil ? "tls-key" : "tls-cert", "a client certificate needs both tls-cert and tls-key")
        }
        if let key = options.tlsKey {
            do { try SecretFile.check(key, holding: "TLS client key") } catch { throw failure("tls-key", "\(error)") }
        }
        security.tls = NATSTLSSettings(certificateAuthorityFile: options.tlsCA, certificateFile: options.tlsCert, keyFile: options.tlsKey)
        // The files given are read now, so that one that cannot be used is refused here; without any, the system's
        // store is read when a server asks for TLS (a host without ca-certificates may never need it).
        if options.tlsCA != nil || options.tlsCert != nil {
            do {
                try security.tls.check()
            } catch {
                throw failure(options.tlsCA != nil ? "tls-ca" : "tls-cert", "\(error)")
            }
        }
        var digest = Hasher()
        for file in [options.tlsCA, options.tlsCert, options.tlsKey].compactMap({ $0 }) {
            // Read as the TLS layer just did; one that cannot be read now was refused above.
            digest.combine((try? SecretFile.contents(of: file, atMost: 16 << 20)) ?? [])
        }
        security.tlsFilesDigest = digest.finalize()
        return security
    }

    /// Why every connection must use TLS, whatever the URL's scheme: the setting that asks for it, or nil.
    var tlsRequirement: String? {
        if options.tlsCA != nil { return "tls-ca is given" }
        if options.tlsCert != nil { return "a client certificate (tls-cert) is given" }
        switch credentials {
        case .userPassword?: return "a password is given"
        case .token?: return "a token is given"
        default: return nil
        }
    }

    /// The `[nats]` lines of `notifyd --check-config`: paths and the user, never a secret.
    var summary: [String] {
        var lines: [String] = []
        for (key, value) in [
            ("tls-ca", options.tlsCA), ("tls-cert", options.tlsCert), ("tls-key", options.tlsKey), ("user", options.user),
            ("password-file", options.passwordFile), ("token-file", options.tokenFile), ("nkey-file", options.nkeyFile),
            ("credentials", options.credentials),
        ] {
            if let value { lines.append("\(key) = \(value)") }
        }
        if let credentials { lines.append("# logs in with \(credentials)") }
        return lines
    }
}
