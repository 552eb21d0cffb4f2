import Crypto
import Foundation
import Testing

@testable import NATSClient

/// NKeys and the `CONNECT` fields of each login, against the vectors NATS's own documentation and clients use (no
/// socket; the logins against a real server are in NATSLoginTests).
@Suite("NATS credentials", .timeLimit(.minutes(1)))
struct NATSCredentialsTests {
    /// The user seed of NATS's documentation, its public key, and a nonce with the signature other clients' tests hold.
    static let seed = "SUACSSL3UAHUDXKFSNVUZRF5UHPMWZ6BFDTJ7M6USDXIEDNPPQYYYCU3VY"
    static let publicKey = "UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4"
    static let nonce = "DhXdTMAeiHhLDig"
    static let signature = "WosANJXgeyxerXFo0twRiMG-_ZjYp1K_46bFeFax705yFTCTjM18jWl01gGYk4KKbadiHd-hP3WgUQ2iLZUAAA"

    @Test("a seed gives its public key, signs a nonce as other clients do, and writes back as read")
    func seedVector() throws {
        let seed = try NKeySeed(parsing: Self.seed + "\n")
        #expect(seed.kind == .user)
        #expect(seed.publicKey == Self.publicKey)
        #expect(try seed.sign(Array(Self.nonce.utf8)) == Self.signature)
        #expect(seed.text == Self.seed)
        #expect(!seed.description.contains(Self.seed), "a seed never prints itself")
    }

    @Test("a fresh key's seed and public key are read back the same (every byte value through base32)")
    func roundTrip() throws {
        for _ in 0..<64 {
            let key = Curve25519.Signing.PrivateKey()
            let seed = try NKeySeed(kind: .account, privateKey: Array(key.rawRepresentation))
            let read = try NKeySeed(parsing: seed.text)
            #expect(read == seed)
            #expect(read.kind == .account && seed.text.hasPrefix("SA") && seed.publicKey.hasPrefix("A"))
            let publicKey = Array(key.publicKey.rawRepresentation)
            let signature = try #require(Data(base64Encoded: Self.padded(try seed.sign([1, 2, 3]))))
            #expect(try Curve25519.Signing.PublicKey(rawRepresentation: publicKey).isValidSignature(signature, for: Data([1, 2, 3])))
        }
    }

    @Test("a bad seed is refused with a sentence that does not repeat it")
    func badSeeds() {
        var mistyped = Array(Self.seed)
        mistyped[20] = mistyped[20] == "A" ? "B" : "A"
        let cases: [(String, String)] = [
            ("SUACSS", "58 characters"),
            ("SUACSSL3UAHUD0KF1NVUZRF5UHPMWZ6BFDTJ7M6USDXIED8PPQYYYCU3VY", "base32"),
            (String(mistyped), "checksum"),
            (Self.publicKey, "not an NKey seed"),
        ]
        for (text, expected) in cases {
            #expect {
                try NKeySeed(parsing: text)
            } throws: { error in
                let sentence = "\(error)"
                return sentence.contains(expected) && !sentence.contains(text)
            }
        }
    }

    @Test("a .creds file gives its JWT and seed; one without either is refused")
    func credsFile() throws {
        let jwt = "eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.eyJzdWIiOiJVIn0.c2ln"
        let text = """
            -----BEGIN NATS USER JWT-----
            \(jwt)
            ------END NATS USER JWT------

            ************************* IMPORTANT *************************
            NKEY Seed printed below can be used to sign and prove identity.

            -----BEGIN USER NKEY SEED-----
            \(Self.seed)
            ------END USER NKEY SEED------
            """
        let credentials = try NATSCredentials(credsFile: text)
        #expect(credentials == .userJWT(jwt: jwt, seed: try NKeySeed(parsing: Self.seed)))
        let fields = try credentials.connectFields(nonce: Self.nonce)
        #expect(fields == #","jwt":"\#(jwt)","sig":"\#(Self.signature)""#)
        #expect(!credentials.description.contains(Self.seed) && !credentials.description.contains(jwt))
        #expect(throws: NATSError.self) { try NATSCredentials(credsFile: text.replacingOccurrences(of: jwt, with: "")) }
        #expect(throws: NATSError.self) { try NATSCredentials(credsFile: text.replacingOccurrences(of: Self.seed, with: "")) }
        #expect(throws: NATSError.self) { try NATSCredentials(credsFile: text.replacingOccurrences(of: jwt, with: "not a jwt")) }
    }

    @Test("each login's CONNECT fields, JSON-escaped; a signing login without a nonce is refused")
    func connectFields() throws {
        #expect(try NATSCredentials.userPassword(user: "a\"b", password: "p\\w\n").connectFields(nonce: nil) == #","user":"a\"b","pass":"p\\w\n""#)
        #expect(try NATSCredentials.token("t0k").connectFields(nonce: nil) == #","auth_token":"t0k""#)
        let nkey = NATSCredentials.nkey(try NKeySeed(parsing: Self.seed))
        #expect(try nkey.connectFields(nonce: Self.nonce) == #","nkey":"\#(Self.publicKey)","sig":"\#(Self.signature)""#)
        #expect(throws: NATSError.self) { try nkey.connectFields(nonce: nil) }
    }

    static func padded(_ base64URL: String) -> String {
        let standard = base64URL.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        return standard + String(repeating: "=", count: (4 - standard.count % 4) % 4)
    }
}
