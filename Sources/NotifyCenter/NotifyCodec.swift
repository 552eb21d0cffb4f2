#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import NIOCore

/// How a notification's value becomes a payload and back.
///
/// ``json`` is the default of `Codable` types: scripts and `notify` read and write the same messages. Another codec
/// (a binary one, a versioned one) is two functions.
public struct NotifyCodec<Value>: Sendable {
    /// A short name for the encoding, for error messages (`json`).
    public let name: String
    private let encodeValue: @Sendable (Value) throws -> ByteBuffer
    private let decodeValue: @Sendable (ByteBuffer) throws -> Value

    /// A codec of two functions: `encode` makes the payload of a value, `decode` the value of a payload (throwing
    /// when the payload is not one).
    public init(
        name: String,
        encode: @escaping @Sendable (Value) throws -> ByteBuffer,
        decode: @escaping @Sendable (ByteBuffer) throws -> Value
    ) {
        self.name = name
        encodeValue = encode
        decodeValue = decode
    }

    /// The payload of `value`.
    public func encode(_ value: Value) throws -> ByteBuffer {
        try encodeValue(value)
    }

    /// The value of `payload`.
    public func decode(_ payload: ByteBuffer) throws -> Value {
        try decodeValue(payload)
    }
}

extension NotifyCodec where Value: Codable & Sendable {
    /// JSON, as `JSONEncoder` writes it, keys sorted, slashes unescaped, dates as ISO 8601 text to the millisecond
    /// (`2026-11-25T10:00:00.250Z`: what `jq` and JavaScript read); decoding takes what `JSONDecoder` does, and dates
    /// with or without fractional seconds and with any offset (`date -Iseconds`), so a script's `notify send` reads
    /// as a value.
    public static var json: NotifyCodec {
        NotifyCodec(
            name: "json",
            encode: { ByteBuffer(bytes: try JSONCoders.encoder.encode($0)) },
            decode: { try JSONCoders.decoder.decode(Value.self, from: Data($0.readableBytesView)) }
        )
    }
}

/// The JSON coders of every ``NotifyCodec/json``, made once: `json` is asked for at each post (a type's `codec`
/// is computed), and making an encoder and a decoder each time cost more than the encoding. They are safe to share
/// across threads.
private enum JSONCoders {
    static let dateStyle = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(date.formatted(dateStyle))
        }
        encoder.outputFormatting = [.withoutEscapingSlashes, .sortedKeys]
        return encoder
    }()

    static let decoder: JSONDecoder = {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            do {
                return try dateStyle.parse(text)
            } catch {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "\"\(text)\" is not an ISO 8601 date")
            }
        }
        return decoder
    }()
}
