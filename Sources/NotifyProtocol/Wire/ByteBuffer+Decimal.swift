public import NIOCore

extension ByteBuffer {
    /// Writes `value` in decimal without building a `String` (a 16-digit microsecond time would not fit the
    /// small-string storage and would cost an allocation per delivery).
    /// - Returns: the number of bytes written.
    @discardableResult
    @inlinable
    public mutating func writeDecimal(_ value: UInt64) -> Int {
        var digits = 1
        var rest = value / 10
        while rest > 0 {
            digits += 1
            rest /= 10
        }
        return writeWithUnsafeMutableBytes(minimumWritableBytes: digits) { buffer in
            var remaining = value
            var index = digits - 1
            while index >= 0 {
                buffer[index] = UInt8(truncatingIfNeeded: remaining % 10) &+ UInt8(ascii: "0")
                remaining /= 10
                index -= 1
            }
            return digits
        }
    }

    /// Writes `value` in decimal, with a minus sign when negative.
    @discardableResult
    @inlinable
    public mutating func writeDecimal(_ value: Int64) -> Int {
        if value >= 0 { return writeDecimal(UInt64(value)) }
        return writeInteger(UInt8(ascii: "-")) + writeDecimal(value.magnitude)
    }
}
