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
    /// JSON, as `JSONEncoder` writes it, with dates as ISO 8601 text (what `date -Iseconds` and `jq` read) and
    /// slashes unescaped; decoding accepts what `JSONDecoder` does, so a script's `notify send` reads as a value.
    public static var json: NotifyCodec {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.withoutEscapingSlashes, .sortedKeys]
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return NotifyCodec(
            name: "json",
            encode: { ByteBuffer(bytes: try encoder.encode($0)) },
            decode: { try decoder.decode(Value.self, from: Data($0.readableBytesView)) }
        )
    }
}
