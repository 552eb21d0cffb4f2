import Testing

@testable import NotifyBus
@testable import NotifyBroker
@testable import NotifyProtocol
import TestSupport

/// The broker's topics by name: an open-addressing table that must agree with a dictionary, whatever the order of
/// insertions and removals.
@Suite("Topic map", .timeLimit(.minutes(3)))
struct TopicMapTests {
    @Test("random insertions, removals and lookups agree with a dictionary; removals leave no slot a lookup stops at")
    func agreesWithADictionary() throws {
        let seed = SeededRandom.seed(default: 1_814)
        var random = SeededRandom(seed: seed)
        var map = TopicMap()
        var model: [String: TopicState] = [:]
        // Few names, many operations: runs collide, wrap around the table's end, and are shifted back again.
        let names = (0..<3_000).map { "t.\($0 % 7).\($0)" }
        for step in 0..<60_000 {
            let name = names[Int.random(in: 0..<names.count, using: &random)]
            if let state = model[name], Bool.random(using: &random) {
                map.remove(state)
                model[name] = nil
            } else if model[name] == nil {
                let state = TopicState(topic: try Topic(name))
                map.insert(state)
                model[name] = state
            }
            let probe = names[Int.random(in: 0..<names.count, using: &random)]
            guard map[probe] === model[probe] else {
                Issue.record("step \(step) (seed \(seed)): \(probe) is \(String(describing: map[probe]?.topic.name)), expected \(String(describing: model[probe]?.topic.name))")
                return
            }
            #expect(map.count == model.count)
        }
        for (name, state) in model { #expect(map[name] === state) }
        #expect(Set(map.all.map(\.topic.name)) == Set(model.keys))
        #expect(map.capacity * 7 >= map.count * 8, "at most seven eighths full")
    }

    @Test("100,000 topics take 131,072 slots of 12 bytes: 16 bytes per topic")
    func memory() throws {
        var map = TopicMap()
        for index in 0..<100_000 { map.insert(TopicState(topic: try Topic("mem.t\(index)"))) }
        #expect(map.capacity == 131_072)
        #expect(map["mem.t99999"]?.topic.name == "mem.t99999")
        #expect(map["mem.t100000"] == nil)
    }
}
