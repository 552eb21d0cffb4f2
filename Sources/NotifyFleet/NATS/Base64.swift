/// Standard base 64 (RFC 4648, with padding), as JetStream's `STREAM.MSG.GET` gives a message's data: decoded
/// without Foundation, refusing anything else.
enum Base64 {
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, character) in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8.enumerated() {
            table[Int(character)] = UInt8(index)
        }
        return table
    }()

    /// The bytes `text` encodes; nil when it is not base 64.
    static func decode(_ text: some Collection<UInt8>) -> [UInt8]? {
        guard text.count % 4 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.count / 4 * 3)
        var quad: UInt32 = 0
        var filled = 0
        var padding = 0
        for character in text {
            if character == UInt8(ascii: "=") {
                padding += 1
                guard padding <= 2 else { return nil }
                quad <<= 6
            } else {
                let value = values[Int(character)]
                guard value != 0xFF, padding == 0 else { return nil }
                quad = quad << 6 | UInt32(value)
            }
            filled += 1
            if filled == 4 {
                bytes.append(UInt8(truncatingIfNeeded: quad >> 16))
                bytes.append(UInt8(truncatingIfNeeded: quad >> 8))
                bytes.append(UInt8(truncatingIfNeeded: quad))
                quad = 0
                filled = 0
            }
        }
        bytes.removeLast(padding)
        return bytes
    }
}
