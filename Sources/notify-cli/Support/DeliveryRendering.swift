import NIOCore
import NotifyBus

/// The bytes `notify subscribe`, `wait`, `history` and `latest` print for a delivery, appended to a buffer the
/// caller reuses: what one read of the connection brought is rendered into one buffer and written with one
/// `write`, with no string made per message.
extension DeliveryFormat {
    /// Appends the bytes to print for `delivery`, ending with exactly one line break (see ``render(_:)``).
    func render(_ delivery: Delivery, into out: inout [UInt8]) {
        switch self {
        case .raw:
            DeliveryFormat.appendTerminated(delivery.payload, to: &out)
        case .line:
            out.append(contentsOf: delivery.topic.name.utf8)
            out.append(UInt8(ascii: " "))
            DeliveryFormat.appendTerminated(delivery.payload, to: &out)
        case .json:
            DeliveryFormat.appendJSON(delivery, to: &out)
            out.append(UInt8(ascii: "\n"))
        }
    }

    /// Appends `payload` and a line break unless it ends with one; copied as one block, not byte by byte through a
    /// collection view.
    private static func appendTerminated(_ payload: ByteBuffer, to out: inout [UInt8]) {
        payload.withUnsafeReadableBytes { bytes in
            out.append(contentsOf: bytes)
            if bytes.last != UInt8(ascii: "\n") { out.append(UInt8(ascii: "\n")) }
        }
    }

    /// The JSON object of ``json(_:)-(Delivery)``, byte for byte, appended to `out`.
    static func appendJSON(_ delivery: Delivery, to out: inout [UInt8]) {
        out.appendStatic(#"{"topic":"#)
        out.appendJSONString(delivery.topic.name)
        out.appendStatic(#","seq":"#)
        JSONBytes.appendNumber(delivery.sequence, to: &out)
        out.appendStatic(#","time":""#)
        JSONBytes.appendTime(delivery.time, to: &out)
        out.appendStatic(#"","uid":"#)
        JSONBytes.appendNumber(UInt64(delivery.publisher.uid), to: &out)
        out.appendStatic(#","pid":"#)
        if delivery.publisher.pid < 0 { out.append(UInt8(ascii: "-")) }
        JSONBytes.appendNumber(UInt64(delivery.publisher.pid.magnitude), to: &out)
        out.appendStatic(#","unit":"#)
        if let unit = delivery.publisher.unit { out.appendJSONString(unit) } else { out.appendStatic("null") }
        out.appendStatic(#","host":"#)
        if let host = delivery.publisher.host { out.appendJSONString(host) } else { out.appendStatic("null") }
        delivery.payload.withUnsafeReadableBytes { payload in
            if JSONBytes.isUTF8(payload) {
                out.appendStatic(#","payload":"#)
                out.appendJSONString(payload)
            } else {
                out.appendStatic(#","payload_base64":""#)
                out.append(contentsOf: Base64.encode(Array(payload)).utf8)
                out.append(UInt8(ascii: "\""))
            }
        }
        out.append(UInt8(ascii: "}"))
    }
}

extension Array where Element == UInt8 {
    /// Appends the bytes of a literal, copied as one block (a `String`'s `utf8` view is copied through its guts).
    mutating func appendStatic(_ text: StaticString) {
        append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }
}

/// JSON written as bytes, as ``JSONTextWriter`` writes it as text (strings escaped by NotifyProtocol's one escaper).
enum JSONBytes {
    static func appendNumber(_ value: UInt64, to out: inout [UInt8]) {
        out.appendDecimal(value)
    }

    /// Appends `time` as ``PublishTime/rfc3339`` writes it.
    static func appendTime(_ time: PublishTime, to out: inout [UInt8]) {
        time.appendRFC3339(to: &out)
    }

    /// Whether `bytes` are UTF-8 text (what ``Delivery/text`` decodes): ASCII is checked without decoding.
    static func isUTF8(_ bytes: UnsafeRawBufferPointer) -> Bool {
        if bytes.allSatisfy({ $0 < 0x80 }) { return true }
        return String(validating: bytes, as: UTF8.self) != nil
    }
}
