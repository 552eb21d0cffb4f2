import NotifyBus

/// How fast "which subscriptions match this topic" is answered as subscriptions grow, against the obvious
/// alternative of testing every pattern.
func subscriptionIndexBenchmarks(_ harness: inout Harness) {
    print("\n== SubscriptionIndex: matches for one topic ==")
    var random = BenchmarkRandom(seed: 42)

    // Topics look like service.instance.event; exact subscriptions name one topic each.
    func topic(_ i: Int) -> Topic { try! Topic("svc\(i % 1000).host\(i % 97).event\(i)") }
    let topicCount = 100_000
    let topics = (0..<topicCount).map(topic)
    let probes = (0..<10_000).map { _ in topics[Int.random(in: 0..<topicCount, using: &random)] }

    for exactCount in [1_000, 100_000] {
        let index = SubscriptionIndex<Int>()
        for i in 0..<exactCount { index.insert(i, for: TopicPattern(topics[i])) }
        harness.measure("\(exactCount) exact subscriptions, match one topic", operations: probes.count) {
            var found = 0
            for probe in probes { index.forEachMatch(of: probe) { _ in found += 1 } }
            blackHole(found)
        }
    }

    for patternCount in [100, 10_000] {
        let index = SubscriptionIndex<Int>()
        var patterns: [TopicPattern] = []
        for i in 0..<100_000 { index.insert(i, for: TopicPattern(topics[i])) }
        for i in 0..<patternCount {
            let text: String
            switch i % 3 {
            case 0: text = "svc\(i % 1000).*.event\(i)"
            case 1: text = "svc\(i % 1000).host\(i % 97).>"
            default: text = "*.host\(i % 97).event\(i)"
            }
            let pattern = try! TopicPattern(text)
            patterns.append(pattern)
            index.insert(100_000 + i, for: pattern)
        }
        let indexed = harness.measure("100000 exact + \(patternCount) wildcard patterns, trie", operations: probes.count) {
            var found = 0
            for probe in probes { index.forEachMatch(of: probe) { _ in found += 1 } }
            blackHole(found)
        }
        let scanProbes = Array(probes.prefix(patternCount >= 10_000 ? 100 : 2_000))
        let scanned = harness.measure("\(patternCount) wildcard patterns, test each (baseline)", operations: scanProbes.count) {
            var found = 0
            for probe in scanProbes { for pattern in patterns where pattern.matches(probe) { found += 1 } }
            blackHole(found)
        }
        harness.ratio("trie vs testing every pattern", slow: scanned, fast: indexed)
    }

    let fanOut = SubscriptionIndex<Int>()
    let hot = try! TopicPattern("alerts.>")
    for i in 0..<1_000 { fanOut.insert(i, for: hot) }
    let alert = try! Topic("alerts.disk.full")
    harness.measure("1000 subscribers on one pattern, visit all (per subscriber)", operations: 1_000 * 100) {
        var found = 0
        for _ in 0..<100 { fanOut.forEachMatch(of: alert) { _ in found += 1 } }
        blackHole(found)
    }

    let churn = (0..<10_000).map { try! TopicPattern("churn.\($0 % 100).*.x\($0)") }
    harness.measure("insert + remove a wildcard subscription", operations: churn.count) {
        let index = SubscriptionIndex<Int>()
        for (i, pattern) in churn.enumerated() { index.insert(i, for: pattern) }
        for (i, pattern) in churn.enumerated() { index.remove(i, for: pattern) }
        blackHole(index.count)
    }
}

/// SplitMix64, so every run benchmarks the same inputs.
struct BenchmarkRandom: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
