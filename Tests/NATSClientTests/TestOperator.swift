import Crypto
import Foundation

@testable import NATSClient

/// An operator, an account and a user of NATS's decentralized auth, made for one test: the server configuration
/// that trusts them (operator mode, the account preloaded in memory), and the user's `.creds` text as `nsc` writes
/// it. JWTs are signed with the issuers' NKeys, as nats-server checks them.
struct TestOperator {
    let operatorSeed = Self.freshSeed(.operator_)
    let accountSeed = Self.freshSeed(.account)
    /// The operator's system account, which JetStream needs in operator mode.
    let systemSeed = Self.freshSeed(.account)
    let userSeed = Self.freshSeed(.user)

    static func freshSeed(_ kind: NKeySeed.Kind) -> NKeySeed {
        try! NKeySeed(kind: kind, privateKey: Array(Curve25519.Signing.PrivateKey().rawRepresentation))
    }

    /// nats-server configuration for operator mode with this account.
    var serverConfiguration: String {
        let account = accountSeed.publicKey
        let system = systemSeed.publicKey
        let systemClaims = #"{"limits":{"subs":-1,"data":-1,"payload":-1,"imports":-1,"exports":-1,"wildcards":true,"conn":-1,"leaf":-1},"default_permissions":{"pub":{},"sub":{}},"type":"account","version":2}"#
        return """
            operator: \(Self.jwt(issuer: operatorSeed, subject: operatorSeed.publicKey, name: "test-operator", nats: #"{"system_account":"\#(system)","type":"operator","version":2}"#))
            system_account: \(system)
            resolver: MEMORY
            authorization { timeout: 30 }
            resolver_preload: {
              \(account): \(Self.jwt(issuer: operatorSeed, subject: account, name: "test-account", nats: Self.accountClaims))
              \(system): \(Self.jwt(issuer: operatorSeed, subject: system, name: "SYS", nats: systemClaims))
            }
            """
    }

    /// The user's `.creds` file.
    func creds(expiresAt: Int? = nil) -> String {
        let user = Self.jwt(
            issuer: accountSeed,
            subject: userSeed.publicKey,
            name: "test-user",
            nats: #"{"pub":{},"sub":{},"subs":-1,"data":-1,"payload":-1,"type":"user","version":2}"#,
            expiresAt: expiresAt
        )
        return """
            -----BEGIN NATS USER JWT-----
            \(user)
            ------END NATS USER JWT------

            ************************* IMPORTANT *************************
            NKEY Seed printed below can be used to sign and prove identity.
            NKEYs are sensitive and should be treated as secrets.

            -----BEGIN USER NKEY SEED-----
            \(userSeed.text)
            ------END USER NKEY SEED------

            *************************************************************

            """
    }

    static let accountClaims = #"{"limits":{"subs":-1,"data":-1,"payload":-1,"imports":-1,"exports":-1,"wildcards":true,"conn":-1,"leaf":-1,"mem_storage":-1,"disk_storage":-1,"streams":-1,"consumer":-1},"default_permissions":{"pub":{},"sub":{}},"type":"account","version":2}"#

    /// A JWT (header `ed25519-nkey`) of these claims, signed by `issuer`.
    static func jwt(issuer: NKeySeed, subject: String, name: String, nats: String, expiresAt: Int? = nil) -> String {
        let header = Base64URL.encode(Array(#"{"typ":"JWT","alg":"ed25519-nkey"}"#.utf8))
        let now = Int(Date().timeIntervalSince1970)
        let expiry = expiresAt.map { #","exp":\#($0)"# } ?? ""
        let jti = Base32.encode(Array(SHA256.hash(data: Array("\(subject)\(now)\(name)".utf8))))
        let claims = #"{"jti":"\#(jti)","iat":\#(now)\#(expiry),"iss":"\#(issuer.publicKey)","name":"\#(name)","sub":"\#(subject)","nats":\#(nats)}"#
        let body = header + "." + Base64URL.encode(Array(claims.utf8))
        return body + "." + (try! issuer.sign(Array(body.utf8)))
    }
}
