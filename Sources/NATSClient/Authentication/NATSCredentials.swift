import Foundation

/// How a client proves who it is to a NATS server: each kind nats-server takes from a client.
///
/// Each goes into `CONNECT` as its fields (``connectFields(nonce:)``); an NKey, and a user JWT's key, sign the nonce
/// the server sent in its `INFO`, so the secret itself never crosses.
public enum NATSCredentials: Sendable, Equatable, CustomStringConvertible {
    /// A user name and password (`user`, `pass`).
    case userPassword(user: String, password: String)
    /// A token (`auth_token`).
    case token(String)
    /// An NKey: the server knows the public key; the seed signs the nonce (`nkey`, `sig`).
    case nkey(NKeySeed)
    /// A decentralized-auth user: the JWT an account signed, and the user's NKey seed to sign the nonce (`jwt`, `sig`),
    /// as a `.creds` file holds them.
    case userJWT(jwt: String, seed: NKeySeed)

    /// Reads a `.creds` file's text (as `nsc` writes it): the user JWT and its NKey seed, each between its `-----BEGIN …`
    /// and `------END …` lines.
    public init(credsFile text: String) throws(NATSError) {
        var blocks: [String: String] = [:]
        var current: String?
        var body = ""
        for rawLine in text.split(whereSeparator: \.isNewline) {
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            if line.hasPrefix("-----BEGIN ") {
                current = line.contains("JWT") ? "jwt" : line.contains("SEED") ? "seed" : nil
                body = ""
            } else if line.hasPrefix("------END ") || line.hasPrefix("-----END ") {
                if let name = current, blocks[name] == nil { blocks[name] = body }
                current = nil
            } else if current != nil {
                body += line
            }
        }
        guard let jwt = blocks["jwt"], !jwt.isEmpty else {
            throw NATSError("no user JWT in it (a -----BEGIN NATS USER JWT----- block)")
        }
        guard jwt.split(separator: ".").count == 3, jwt.allSatisfy({ $0.isLetter || $0.isNumber || "-_.".contains($0) }) else {
            throw NATSError("its user JWT is not a JWT (three base64url parts separated by dots)")
        }
        guard let seedText = blocks["seed"], !seedText.isEmpty else {
            throw NATSError("no NKey seed in it (a -----BEGIN USER NKEY SEED----- block)")
        }
        self = .userJWT(jwt: jwt, seed: try NKeySeed(parsing: seedText))
    }

    /// The `CONNECT` fields, each with a leading comma, to append to its other options; `nonce` is the server's
    /// (its `INFO`'s `nonce`), which an NKey and a user JWT sign.
    public func connectFields(nonce: String?) throws(NATSError) -> String {
        switch self {
        case .userPassword(let user, let password):
            return #","user":\#(JSONScan.quoted(user)),"pass":\#(JSONScan.quoted(password))"#
        case .token(let token):
            return #","auth_token":\#(JSONScan.quoted(token))"#
        case .nkey(let seed):
            return #","nkey":\#(JSONScan.quoted(seed.publicKey)),"sig":\#(JSONScan.quoted(try signature(seed, nonce)))"#
        case .userJWT(let jwt, let seed):
            return #","jwt":\#(JSONScan.quoted(jwt)),"sig":\#(JSONScan.quoted(try signature(seed, nonce)))"#
        }
    }

    private func signature(_ seed: NKeySeed, _ nonce: String?) throws(NATSError) -> String {
        guard let nonce, !nonce.isEmpty else {
            throw NATSError("the server sent no nonce to sign: it does not take NKey or JWT logins (is it configured for them?)")
        }
        do {
            return try seed.sign(Array(nonce.utf8))
        } catch {
            throw NATSError("signing the server's nonce failed: \(error)")
        }
    }

    /// The kind, and whom it names; never a secret.
    public var description: String {
        switch self {
        case .userPassword(let user, _): "user \(user) with a password"
        case .token: "a token"
        case .nkey(let seed): "NKey \(seed.publicKey)"
        case .userJWT(_, let seed): "a user JWT for \(seed.publicKey)"
        }
    }

    /// A short name of the kind, for logs and status.
    public var kind: String {
        switch self {
        case .userPassword: "user and password"
        case .token: "token"
        case .nkey: "NKey"
        case .userJWT: "credentials file"
        }
    }
}
