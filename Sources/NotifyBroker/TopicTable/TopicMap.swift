import NotifyProtocol

/// The broker's topics by name: an open-addressing hash table of their states.
///
/// Not a `Dictionary<ByteKey, TopicState>`: its bucket holds the name (16 bytes) beside the reference, and a
/// dictionary keeps at most three quarters of its buckets in use, so at 100,000 topics it had 262,144 buckets of
/// 24 bytes, 63 bytes per topic. Here a slot is the reference and 32 bits of the name's hash (12 bytes), and the
/// table fills up to seven eighths before it doubles: 16 bytes per topic at 100,000. The name is the state's own.
///
/// Linear probing, with the hash's low bits as the home slot; a lookup compares names only where the 32 bits match.
/// Removal shifts the run after the removed slot back (no tombstones), so a table that churns through topics does
/// not slow down. Growing needs no name hashed again: the home slot comes from the stored bits. The hash is the
/// standard library's, seeded at random per process, so nobody can choose names that collide.
///
/// Owned by the broker's thread, like the table.
struct TopicMap {
    /// Each slot's topic, nil when empty.
    private var slots: [TopicState?] = []
    /// Each slot's 32 bits of its name's hash (never 0), 0 when empty.
    private var tags: [UInt32] = []
    private(set) var count = 0

    /// The topic named `name`, if any.
    subscript(name: String) -> TopicState? {
        guard count > 0 else { return nil }
        var name = name
        return name.withUTF8 { bytes in
            let tag = TopicMap.tag(of: UnsafeRawBufferPointer(bytes))
            let mask = tags.count - 1
            var slot = Int(tag) & mask
            while true {
                let found = tags[slot]
                if found == 0 { return nil }
                if found == tag, let state = slots[slot], state.topic.hasName(UnsafeRawBufferPointer(bytes)) { return state }
                slot = (slot + 1) & mask
            }
        }
    }

    /// Adds `state`, whose name must not be in the table.
    mutating func insert(_ state: TopicState) {
        if (count + 1) * 8 > tags.count * 7 { grow() }
        place(state, tag: TopicMap.tag(of: state.topic.name))
        count += 1
    }

    /// Removes `state`, if it is in the table.
    mutating func remove(_ state: TopicState) {
        guard count > 0 else { return }
        let tag = TopicMap.tag(of: state.topic.name)
        let mask = tags.count - 1
        var hole = Int(tag) & mask
        while slots[hole] !== state {
            if tags[hole] == 0 { return }
            hole = (hole + 1) & mask
        }
        // Each entry of the run after the hole moves into it unless its home slot lies after the hole (cyclically,
        // up to where it sits): a lookup that starts at its home must still find it before an empty slot.
        var next = hole
        while true {
            next = (next + 1) & mask
            let moving = tags[next]
            if moving == 0 { break }
            let home = Int(moving) & mask
            let staysPut = hole <= next ? (hole < home && home <= next) : (hole < home || home <= next)
            if staysPut { continue }
            tags[hole] = moving
            slots[hole] = slots[next]
            hole = next
        }
        tags[hole] = 0
        slots[hole] = nil
        count -= 1
    }

    /// Every topic, in no particular order (a copy: for the rare walks over all, such as a compaction).
    var all: [TopicState] { slots.compactMap { $0 } }

    /// Calls `body` with every topic, in no particular order.
    func forEach(_ body: (TopicState) -> Void) {
        for case let state? in slots { body(state) }
    }

    /// Slots in the table, for tests: what its memory is.
    var capacity: Int { tags.count }

    private mutating func grow() {
        let oldSlots = slots
        let oldTags = tags
        let capacity = Swift.max(16, 2 * oldTags.count)
        slots = Array(repeating: nil, count: capacity)
        tags = Array(repeating: 0, count: capacity)
        for index in oldTags.indices where oldTags[index] != 0 {
            place(oldSlots[index]!, tag: oldTags[index])
        }
    }

    /// Puts `state` in the first empty slot from its home.
    private mutating func place(_ state: TopicState, tag: UInt32) {
        let mask = tags.count - 1
        var slot = Int(tag) & mask
        while tags[slot] != 0 { slot = (slot + 1) & mask }
        tags[slot] = tag
        slots[slot] = state
    }

    private static func tag(of name: String) -> UInt32 {
        var name = name
        return name.withUTF8 { tag(of: UnsafeRawBufferPointer($0)) }
    }

    private static func tag(of bytes: UnsafeRawBufferPointer) -> UInt32 {
        var hasher = Hasher()
        hasher.combine(bytes: bytes)
        let hash = UInt64(bitPattern: Int64(hasher.finalize()))
        let tag = UInt32(truncatingIfNeeded: hash ^ (hash >> 32))
        return tag == 0 ? 1 : tag
    }
}
