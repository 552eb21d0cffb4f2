/// Counting sequence numbers without trapping. A topic's numbers can come from outside (another host's
/// `<seq>`, a client's `since=`, the state log), and `ClosedRange<UInt64>.count` is an `Int`, which traps
/// for a range wider than `Int.max`: counts of numbers stay `UInt64` here, and saturate instead of overflowing.
extension ClosedRange<UInt64> {
    /// How many numbers the range holds; `UInt64.max` for the one range that holds more (`0...UInt64.max`).
    package var size: UInt64 {
        (upperBound - lowerBound).saturatingAdd(1)
    }
}

extension UInt64 {
    /// `self + other`, or `UInt64.max` where the sum would overflow.
    package func saturatingAdd(_ other: UInt64) -> UInt64 {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? .max : sum
    }
}
