import Crypto
import Foundation

/// An NKey seed (NATS's Ed25519 keys, as `nsc` and `nk` write them): the 32 bytes of an Ed25519 private key, with
/// the kind of key it is (user, account, operator, …). It signs the server's nonce when the client logs in, and
/// gives the public key (`U…` for a user) that the server knows the client by.
///
/// The text form is base32 (RFC 4648, no padding) of two prefix bytes, the 32 bytes, and a CRC-16 (XMODEM,
/// little-endian) of what precedes it; a seed starts with `S`, then the kind's letter (`SU…` for a user).
public struct NKeySeed: Sendable, Equatable, CustomStringConvertible {
    /// The kind of key (`NKeySeed.Kind`) as its prefix byte.
    public let kind: Kind
    /// The Ed25519 private key's 32 bytes (the key is made from them when it signs: CryptoKit's type is not
    /// `Sendable`).
    private let privateKey: [UInt8]

    /// The kinds of NKey, by the prefix byte their public keys start with.
    public enum Kind: UInt8, Sendable {
        case operator_ = 112  // 'O'
        case account = 0  // 'A'
        case user = 160  // 'U'
        case server = 104  // 'N'
        case cluster = 16  // 'C'
    }

    /// Reads a seed's text (`SU…`); the sentence of the error says what is wrong with it, never the seed itself.
    public init(parsing text: some StringProtocol) throws(NATSError) {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard let raw = Base32.decode(trimmed), raw.count == 36 else {
            if Base32.decode(trimmed)?.count == 35 {
                throw NATSError("this is not an NKey seed but a public key (56 characters): a public key cannot sign")
            }
            throw NATSError("an NKey seed is 58 characters of base32 (it starts with S)")
        }
        guard CRC16.xmodem(raw[0..<34]) == UInt16(raw[34]) | UInt16(raw[35]) << 8 else {
            throw NATSError("the NKey seed's checksum does not match: it was cut or mistyped")
        }
        guard raw[0] & 0b1111_1000 == 18 << 3 else {
            throw NATSError("this is not an NKey seed (a seed starts with S; a public key, which starts with U, A or O, cannot sign)")
        }
        let prefix = (raw[0] & 0b111) << 5 | (raw[1] & 0b1111_1000) >> 3
        guard let kind = Kind(rawValue: prefix) else { throw NATSError("the NKey seed is of an unknown kind") }
        self.kind = kind
        privateKey = Array(raw[2..<34])
    }

    /// A seed of `kind` from the 32 bytes of an Ed25519 private key.
    public init(kind: Kind, privateKey: [UInt8]) throws(NATSError) {
        guard privateKey.count == 32 else { throw NATSError("an Ed25519 private key is 32 bytes") }
        self.kind = kind
        self.privateKey = privateKey
    }

    private var key: Curve25519.Signing.PrivateKey {
        // 32 bytes, checked when the seed was made: the only way this can throw.
        try! Curve25519.Signing.PrivateKey(rawRepresentation: privateKey)
    }

    /// The seed's text form (`SU…`), as a `.creds` or `.nk` file holds it.
    public var text: String {
        var raw: [UInt8] = [18 << 3 | kind.rawValue >> 5, (kind.rawValue & 0b1_1111) << 3]
        raw.append(contentsOf: privateKey)
        return Base32.encode(Self.withChecksum(raw))
    }

    /// The public key's text form (`U…` for a user): what a server's configuration names the user by.
    public var publicKey: String {
        Base32.encode(Self.withChecksum([kind.rawValue] + Array(key.publicKey.rawRepresentation)))
    }

    /// The Ed25519 signature of `bytes` (a server's nonce), base64url without padding, as `CONNECT`'s `sig` carries it.
    public func sign(_ bytes: [UInt8]) throws -> String {
        Base64URL.encode(Array(try key.signature(for: bytes)))
    }

    /// Never the seed: logs and errors may print settings.
    public var description: String { "NKey seed of \(publicKey)" }

    public static func == (lhs: NKeySeed, rhs: NKeySeed) -> Bool {
        lhs.kind == rhs.kind && lhs.privateKey == rhs.privateKey
    }

    private static func withChecksum(_ raw: [UInt8]) -> [UInt8] {
        let crc = CRC16.xmodem(raw[...])
        return raw + [UInt8(crc & 0xFF), UInt8(crc >> 8)]
    }
}

/// RFC 4648 base32, upper case, no padding: the alphabet of NKeys.
enum Base32 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567".utf8)

    static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count * 8 + 4) / 5)
        var buffer: UInt32 = 0
        var bits = 0
        for byte in bytes {
            buffer = buffer << 8 | UInt32(byte)
            bits += 8
            while bits >= 5 {
                bits -= 5
                out.append(alphabet[Int(buffer >> UInt32(bits) & 31)])
            }
        }
        if bits > 0 { out.append(alphabet[Int(buffer << UInt32(5 - bits) & 31)]) }
        return String(decoding: out, as: UTF8.self)
    }

    /// The bytes of `text`, or nil when a character is outside the alphabet.
    static func decode(_ text: some StringProtocol) -> [UInt8]? {
        var out: [UInt8] = []
        var buffer: UInt32 = 0
        var bits = 0
        for character in text.utf8 {
            let value: UInt8
            switch character {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = character - UInt8(ascii: "A")
            case UInt8(ascii: "2")...UInt8(ascii: "7"): value = character - UInt8(ascii: "2") + 26
            default: return nil
            }
            buffer = buffer << 5 | UInt32(value)
            bits += 5
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: buffer >> UInt32(bits)))
            }
        }
        return out
    }
}

/// CRC-16/XMODEM (polynomial 0x1021, initial 0), NKeys' checksum.
enum CRC16 {
    static func xmodem(_ bytes: ArraySlice<UInt8>) -> UInt16 {
        var crc: UInt16 = 0
        for byte in bytes {
            crc ^= UInt16(byte) << 8
            for _ in 0..<8 { crc = crc & 0x8000 != 0 ? crc << 1 ^ 0x1021 : crc << 1 }
        }
        return crc
    }
}

/// Base64 with the URL alphabet and no padding (Go's `RawURLEncoding`), as NATS signatures and JWTs are written.
enum Base64URL {
    static func encode(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
