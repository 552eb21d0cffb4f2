/// A minimal benchmark runner: each case runs a warm-up and then `runs` timed repetitions, and prints the median
/// (with the fastest and slowest run) per operation. Medians, because these machines are shared and noisy.
struct Harness {
    var runs = 7
    var filter: String?

    struct Result {
        let name: String
        let nanosecondsPerOperation: Double
    }

    private(set) var results: [Result] = []

    /// Times `body`, which performs `operations` operations per call, and records the median time per operation.
    @discardableResult
    mutating func measure(_ name: String, operations: Int, _ body: () -> Void) -> Double? {
        if let filter, !name.contains(filter) { return nil }
        body()  // warm-up: caches, lazy allocations
        var samples: [Double] = []
        let clock = ContinuousClock()
        for _ in 0..<runs {
            let elapsed = clock.measure(body)
            let nanoseconds = Double(elapsed.components.seconds) * 1e9 + Double(elapsed.components.attoseconds) / 1e9
            samples.append(nanoseconds / Double(operations))
        }
        samples.sort()
        let median = samples[samples.count / 2]
        results.append(Result(name: name, nanosecondsPerOperation: median))
        print(
            name.padding(to: 62) + format(median).leftPadding(to: 10) + " ns/op"
                + "  (\(format(samples.first!))–\(format(samples.last!)))".leftPadding(to: 20)
                + "  \(formatRate(1e9 / median))/s".leftPadding(to: 12)
        )
        return median
    }

    /// Prints how many times faster `fast` is than `slow`, from recorded medians.
    func ratio(_ label: String, slow: Double?, fast: Double?) {
        guard let slow, let fast else { return }
        print("  → \(label): \(format(slow / fast))× faster")
    }

    private func format(_ value: Double) -> String {
        if value >= 100 { return String(Int(value.rounded())) }
        let tenths = (value * 10).rounded() / 10
        return String(tenths)
    }

    private func formatRate(_ value: Double) -> String {
        if value >= 1e6 { return String((value / 1e5).rounded() / 10) + "M" }
        if value >= 1e3 { return String((value / 1e2).rounded() / 10) + "k" }
        return String(Int(value))
    }
}

/// Keeps the optimizer from deleting work whose result is unused.
@inline(never)
func blackHole<T>(_ value: T) {
    withExtendedLifetime(value) {}
}

extension String {
    func padding(to width: Int) -> String { count >= width ? self : self + String(repeating: " ", count: width - count) }
    func leftPadding(to width: Int) -> String { count >= width ? self : String(repeating: " ", count: width - count) + self }
}
