import NIOCore
import NotifyBus

/// A message event's JSON object, written at once into room reserved for its longest form: the same bytes as
/// ``GatewayEvent/writeJSON(into:)`` writes field by field (tested side by side), for the event a stream sends most.
/// Each field by itself checked the buffer's room and its sole ownership, some 40 times an event: most of what a
/// stream's event loop spent on a message.
enum MessageJSON {
    /// The most room a message is written into at once.
    static var largest: Int { 64 << 10 }

    /// How the object is framed around it: as it is, a JSON line, or SSE's `id:` and `data:` lines.
    enum Framing {
        case bare
        case line
        case serverSentEvent
    }

    /// Appends `delivery`'s object, framed, and returns true; false, with nothing written, when its payload is not
    /// UTF-8 (it then goes in base 64, field by field), or its longest form is over ``largest`` (a large message is
    /// written field by field, in a buffer that grows to its size rather than reserved at six times it).
    static func write(_ delivery: Delivery, framed framing: Framing = .bare, into buffer: inout ByteBuffer) -> Bool {
        var topic = delivery.topic.name
        var unit = delivery.publisher.unit
        var host = delivery.publisher.host
        // Every byte of a string escaped as \u00XX at worst; the rest is fields and numbers.
        let longest = 320 + 6 * (delivery.payload.readableBytes + topic.utf8.count + (unit?.utf8.count ?? 0) + (host?.utf8.count ?? 0))
        guard longest <= largest else { return false }
        let isText = delivery.payload.withUnsafeReadableBytes { isASCII($0) || GatewayEvent.isUTF8($0) }
        guard isText else { return false }
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: longest) { room in
            var out = RawJSON(base: room.baseAddress!)
            let id = MessageID(time: delivery.time, sequence: delivery.sequence)
            if framing == .serverSentEvent {
                out.ascii("id: ")
                out.id(id)
                out.ascii("\ndata: ")
            }
            out.ascii(#"{"id":""#)
            out.id(id)
            out.ascii(#"","time":"#)
            out.decimal(delivery.time.microsecondsSinceEpoch / 1_000_000)
            out.ascii(#","event":"message","topic":"#)
            topic.withUTF8 { out.appendJSONString(UnsafeRawBufferPointer($0)) }
            out.ascii(#","message":"#)
            delivery.payload.withUnsafeReadableBytes { out.appendJSONString($0) }
            out.ascii(#","seq":"#)
            out.decimal(delivery.sequence)
            out.ascii(#","time_us":"#)
            out.decimal(delivery.time.microsecondsSinceEpoch)
            out.ascii(#","uid":"#)
            out.decimal(UInt64(delivery.publisher.uid))
            out.ascii(#","pid":"#)
            out.decimal(UInt64(max(delivery.publisher.pid, 0)))
            if unit != nil {
                out.ascii(#","unit":"#)
                unit!.withUTF8 { out.appendJSONString(UnsafeRawBufferPointer($0)) }
            }
            if host != nil {
                out.ascii(#","host":"#)
                host!.withUTF8 { out.appendJSONString(UnsafeRawBufferPointer($0)) }
            }
            out.byte(UInt8(ascii: "}"))
            switch framing {
            case .bare: break
            case .line: out.byte(UInt8(ascii: "\n"))
            case .serverSentEvent: out.ascii("\n\n")
            }
            return out.count
        }
        return true
    }

    /// Whether `bytes` are all ASCII, eight at a time: what most payloads are, checked before UTF-8's decoder.
    static func isASCII(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var index = 0
        while index + 8 <= bytes.count {
            if bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self) & 0x8080_8080_8080_8080 != 0 { return false }
            index += 8
        }
        while index < bytes.count {
            if bytes[index] >= 0x80 { return false }
            index += 1
        }
        return true
    }
}

/// Writes JSON's pieces at a pointer into room reserved for them all (``MessageJSON``, ``MessageID``, ``JSONWriter``'s
/// numbers): the one place digits are written.
struct RawJSON: JSONOutput {
    let base: UnsafeMutableRawPointer
    private(set) var count = 0

    init(base: UnsafeMutableRawPointer) {
        self.base = base
    }

    mutating func byte(_ byte: UInt8) {
        base.storeBytes(of: byte, toByteOffset: count, as: UInt8.self)
        count += 1
    }

    mutating func appendJSONBytes(_ bytes: UnsafeRawBufferPointer) {
        (base + count).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
        count += bytes.count
    }

    mutating func appendJSONByte(_ byte: UInt8) {
        self.byte(byte)
    }

    mutating func ascii(_ text: StaticString) {
        (base + count).copyMemory(from: text.utf8Start, byteCount: text.utf8CodeUnitCount)
        count += text.utf8CodeUnitCount
    }

    mutating func decimal(_ value: UInt64) {
        digits(value, radix: 10)
    }

    /// A message id as ``MessageID/description`` reads: its time and number in base 36.
    mutating func id(_ id: MessageID) {
        digits(id.time.microsecondsSinceEpoch, radix: 36)
        byte(UInt8(ascii: "-"))
        digits(id.sequence, radix: 36)
    }

    /// `value`'s digits, written from the end of a stack tuple, then copied: one division a digit, by a constant
    /// once this is inlined (a multiplication, where a division by a variable took most of a message's time).
    @inline(__always)
    private mutating func digits(_ value: UInt64, radix: UInt64) {
        var stack: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: room for the 20 digits of UInt64.max
        let written = withUnsafeMutableBytes(of: &stack) { bytes -> Int in
            var at = bytes.count
            var rest = value
            repeat {
                at -= 1
                let digit = UInt8(truncatingIfNeeded: rest % radix)
                bytes[at] = digit < 10 ? UInt8(ascii: "0") + digit : UInt8(ascii: "a") + digit - 10
                rest /= radix
            } while rest > 0
            (base + count).copyMemory(from: bytes.baseAddress! + at, byteCount: bytes.count - at)
            return bytes.count - at
        }
        count += written
    }
}
