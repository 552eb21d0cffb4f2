extension Array where Element == UInt8 {
    /// Appends `value` in decimal, padded with zeros to at least `minimumDigits`: for output rendered as bytes
    /// (times, JSON numbers) without a string per number.
    package mutating func appendDecimal(_ value: UInt64, minimumDigits: Int = 1) {
        var divisor: UInt64 = 1
        var digits = 1
        while digits < minimumDigits || value / divisor >= 10 {
            divisor *= 10
            digits += 1
        }
        var rest = value
        while divisor > 0 {
            append(UInt8(ascii: "0") + UInt8(rest / divisor))
            rest %= divisor
            divisor /= 10
        }
    }
}
