extension Array where Element == UInt8 {
    /// Appends `value` in decimal, padded with zeros to at least `minimumDigits`: for output rendered as bytes
    /// (times, JSON numbers) without a string per number.
    package mutating func appendDecimal(_ value: UInt64, minimumDigits: Int = 1) {
        // Written backwards into a buffer of the most digits a number has, then appended at once.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var start = digits.count
            var rest = value
            repeat {
                start -= 1
                digits[start] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: rest % 10)
                rest /= 10
            } while rest > 0
            while digits.count - start < minimumDigits && start > 0 {
                start -= 1
                digits[start] = UInt8(ascii: "0")
            }
            append(contentsOf: UnsafeBufferPointer(rebasing: digits[start...]))
        }
    }
}
