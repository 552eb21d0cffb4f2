import NIOCore
import NotifyProtocol

/// The ring itself: records stored and loaded across its end, and walked newest or oldest first.
extension TopicHistory {
    /// The ring offset `distance` bytes after `offset` (at most the ring's size), wrapping at its end.
    func position(_ offset: Int, plus distance: Int) -> Int {
        let sum = offset + distance
        return sum >= ring.count ? sum - ring.count : sum
    }

    /// Copies `bytes` into the ring at `offset`, wrapping at its end.
    func store(_ bytes: UnsafeRawBufferPointer, at offset: Int) {
        let first = Swift.min(bytes.count, ring.count - offset)
        UnsafeMutableRawBufferPointer(rebasing: ring[offset..<(offset + first)]).copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[..<first]))
        if first < bytes.count {
            UnsafeMutableRawBufferPointer(rebasing: ring[0..<(bytes.count - first)]).copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[first...]))
        }
    }

    /// Copies the ring's bytes from `offset`, wrapping at its end, into `target`.
    func load(into target: UnsafeMutableRawBufferPointer, from offset: Int) {
        let first = Swift.min(target.count, ring.count - offset)
        UnsafeMutableRawBufferPointer(rebasing: target[0..<first]).copyMemory(from: UnsafeRawBufferPointer(rebasing: ring[offset..<(offset + first)]))
        if first < target.count {
            UnsafeMutableRawBufferPointer(rebasing: target[first...]).copyMemory(from: UnsafeRawBufferPointer(rebasing: ring[0..<(target.count - first)]))
        }
    }

    /// The message whose record starts at `record`.
    func entry(at record: Int) -> Entry {
        var header = TopicHistory.emptyHeader
        withUnsafeMutableBytes(of: &header) { load(into: UnsafeMutableRawBufferPointer(rebasing: $0[..<TopicHistory.headerSize]), from: record) }
        return withUnsafeBytes(of: &header) { bytes in
            let owner = Unmanaged<UserAccount>.fromOpaque(UnsafeRawPointer(bitPattern: bytes.load(fromByteOffset: 16, as: UInt.self))!)
            // Borrowed: reading an entry retains nobody (see ``Entry/owner``).
            return owner._withUnsafeGuaranteedRef { owner in
                Entry(
                    sequence: bytes.load(fromByteOffset: 0, as: UInt64.self),
                    time: PublishTime(microsecondsSinceEpoch: bytes.load(fromByteOffset: 8, as: UInt64.self)),
                    stored: Int(bytes.load(fromByteOffset: 24, as: UInt32.self)),
                    lineStart: Int(bytes.load(fromByteOffset: 32, as: UInt16.self)),
                    payloadSize: Int(bytes.load(fromByteOffset: 28, as: UInt32.self)),
                    owner: owner,
                    record: record
                )
            }
        }
    }

    /// The start of the record that ends where `end` is.
    func recordBefore(_ end: Int) -> Int {
        var size: UInt32 = 0
        withUnsafeMutableBytes(of: &size) { load(into: $0, from: position(end, plus: ring.count - TopicHistory.trailerSize)) }
        return position(end, plus: ring.count - Int(size))
    }

    /// Calls `body` with the messages from the newest back, until it returns false or none is left.
    func forEachNewestFirst(_ body: (Entry) -> Bool) {
        var end = position(head, plus: used)
        for _ in 0..<count {
            let record = recordBefore(end)
            guard body(entry(at: record)) else { return }
            end = record
        }
    }

    /// Calls `body` with `count` messages from the one whose record starts at `record`, oldest first.
    func forEachOldestFirst(from record: Int, count: Int, _ body: (Entry) -> Void) {
        var at = record
        for _ in 0..<count {
            let entry = entry(at: at)
            body(entry)
            at = position(at, plus: entry.recordSize)
        }
    }
}
