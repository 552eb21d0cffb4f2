/// A small, fast, seedable generator (SplitMix64), so randomized tests replay exactly from the seed they print.
public struct SeededRandom: RandomNumberGenerator {
    public private(set) var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A seed from the environment (`NOTIFYD_TEST_SEED`) to replay a failure, else a fixed default.
    public static func seed(default value: UInt64) -> UInt64 {
        if let text = Environment.value(of: "NOTIFYD_TEST_SEED"), let seed = UInt64(text) { return seed }
        return value
    }
}

public enum Environment {
    public static func value(of name: String) -> String? {
        guard let pointer = getenv(name) else { return nil }
        return String(cString: pointer)
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
