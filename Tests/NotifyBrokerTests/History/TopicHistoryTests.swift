import NIOCore
import Testing

@testable import NotifyBus
@testable import NotifyBroker
@testable import NotifyProtocol
import TestSupport

@Suite("A topic's history (no broker)", .timeLimit(.minutes(3)))
struct TopicHistoryTests {
    static func frame(_ sequence: UInt64, _ payload: String) -> ByteBuffer {
        var frame = ByteBuffer()
        frame.writeMessageFrame(
            .delivery,
            requestID: nil,
            topic: "t",
            sequence: sequence,
            time: PublishTime(microsecondsSinceEpoch: 1_000 * sequence),
            publisher: Publisher(uid: 1, pid: 2),
            payload: ByteBuffer(string: payload)
        )
        return frame
    }

    /// The bytes of a message's frame its history's record holds: all but `MSG t <seq> <time> `, which the record
    /// and the topic say already.
    static func keptSize(_ sequence: UInt64, _ payload: String) -> Int {
        frame(sequence, payload).readableBytes - "MSG t \(sequence) \(1_000 * sequence) ".utf8.count
    }

    /// The publisher of every message: a history does not keep its publishers alive, the broker does.
    nonisolated(unsafe) static let owner = UserAccount(uid: 1)

    /// Appends, and returns the payload bytes of what left.
    static func append(_ sequence: UInt64, _ payload: String, to history: inout TopicHistory, _ limits: HistoryLimits) -> Int {
        let frame = frame(sequence, payload)
        var released = 0
        _ = frame.withUnsafeReadableBytes {
            history.append(
                $0,
                lineStart: TopicHistory.lineStart(of: $0, topic: "t", sequence: sequence, time: PublishTime(microsecondsSinceEpoch: 1_000 * sequence)),
                sequence: sequence,
                time: PublishTime(microsecondsSinceEpoch: 1_000 * sequence),
                payloadSize: payload.utf8.count,
                owner: Self.owner,
                limits: limits
            ) { released += $0.payloadSize }
        }
        return released
    }

    static func kept(_ history: TopicHistory, after sequence: UInt64 = 0) -> [UInt64] {
        var sequences: [UInt64] = []
        var decoder = ServerFrameDecoder()
        history.forEach(after: sequence, topic: "t") { entry, frame in
            var input = ByteBuffer(bytes: frame)
            guard case .delivery(let delivery)? = try? decoder.decode(buffer: &input) else { return }
            #expect(delivery.sequence == entry.sequence, "the frame is the entry's own")
            sequences.append(delivery.sequence)
        }
        return sequences
    }

    @Test("keeps the last N messages, oldest first, and says what left")
    func countLimit() {
        var history = TopicHistory()
        let limits = HistoryLimits(messages: 4, bytes: 1 << 20)
        var released = 0
        for sequence in 1...10 as ClosedRange<UInt64> { released += Self.append(sequence, "m\(sequence)", to: &history, limits) }
        #expect(Self.kept(history) == [7, 8, 9, 10])
        #expect(Self.kept(history, after: 8) == [9, 10])
        #expect(history.lastEvicted?.sequence == 6)
        #expect(released == ["m1", "m2", "m3", "m4", "m5", "m6"].map(\.utf8.count).reduce(0, +))
        #expect(history.payloadBytes == ["m7", "m8", "m9", "m10"].map(\.utf8.count).reduce(0, +))
    }

    @Test("a history that never lost a message has nothing evicted and stays in malloc's 64-byte class; the first eviction is remembered")
    func sizeClassAndFirstEviction() {
        var history = TopicHistory()
        let limits = HistoryLimits(messages: 2, bytes: 1 << 20)
        #expect(Self.append(1, "one", to: &history, limits) == 0)
        #expect(history.lastEvicted == nil && history.evictedMessages == 0)
        // 56 bytes of object (64 with malloc's header); debug builds count relocations in 8 more (the 80-byte class).
        #if DEBUG
        let most = 72
        #else
        let most = 56
        #endif
        #expect(malloc_usable_size(Unmanaged.passUnretained(history).toOpaque()) <= most)
        #expect(Self.append(2, "two", to: &history, limits) == 0)
        #expect(Self.append(3, "three", to: &history, limits) == "one".utf8.count)
        #expect(history.lastEvicted?.sequence == 1 && history.lastEvicted?.time == PublishTime(microsecondsSinceEpoch: 1_000))
        #expect(history.evictedMessages == 1)
        history.countEvicted(0)
        history.noteEvicted(through: 0, messages: 0, time: PublishTime(microsecondsSinceEpoch: 0))
        #expect(history.evictedMessages == 1 && history.lastEvicted?.sequence == 1, "nothing counted, nothing moved back")
    }

    @Test("keeps at most its bytes of frames, reusing its buffer as old frames leave")
    func byteLimit() {
        var history = TopicHistory()
        let payload = String(repeating: "x", count: 100)
        let frameSize = Self.frame(1_000, payload).readableBytes
        let limits = HistoryLimits(messages: 1_000, bytes: 5 * frameSize + 10)
        for sequence in 1...1_000 as ClosedRange<UInt64> { _ = Self.append(sequence, payload, to: &history, limits) }
        #expect(Self.kept(history) == Array(996...1_000))
        #expect(history.bytes <= limits.bytes)
    }

    @Test("a full history takes each message without moving the others, in a ring no larger than its limit needs")
    func ring() {
        var history = TopicHistory()
        let limits = HistoryLimits.resumable
        // Sizes that do not divide the ring, so that frames wrap around its end at every offset.
        let payload = { (sequence: UInt64) in String(repeating: Character(UnicodeScalar(UInt8(97 + sequence % 26))), count: 900 + Int(sequence % 250)) }
        var appended = 0
        for sequence in 1...5_000 as ClosedRange<UInt64> {
            appended += Self.frame(sequence, payload(sequence)).readableBytes
            _ = Self.append(sequence, payload(sequence), to: &history, limits)
        }
        // Growing to its size copied what it held a few times; taking messages in once full copies nothing.
        #expect(history.bytesRelocated < 2 * limits.bytes, "relocated \(history.bytesRelocated) bytes for \(appended) appended")
        #expect(history.bytes > limits.bytes - 1_200, "full")
        #expect(history.capacity <= limits.bytes + TopicHistory.recordOverhead * limits.messages)
        var decoder = ServerFrameDecoder()
        var sequences: [UInt64] = []
        history.forEach(after: 0, topic: "t") { entry, frame in
            var input = ByteBuffer(bytes: frame)
            guard case .delivery(let delivery)? = try? decoder.decode(buffer: &input) else {
                Issue.record("message \(entry.sequence) is not a whole frame")
                return
            }
            #expect(delivery.sequence == entry.sequence)
            #expect(String(buffer: delivery.payload) == payload(entry.sequence))
            sequences.append(entry.sequence)
        }
        #expect(sequences.count > 32)
        #expect(sequences == Array((5_001 - UInt64(sequences.count))...5_000))
    }

    @Test("a history that fills up with records a little longer than its first ones keeps a ring about their size, not twice it")
    func ringFitsWhatItHolds() {
        var history = TopicHistory()
        let limits = HistoryLimits(messages: 64, bytes: 64 << 10)
        // Sequence numbers and times gain a digit along the way, so the later records are longer than the first.
        for sequence in 1...64 as ClosedRange<UInt64> { _ = Self.append(sequence, "0123456789abcdef", to: &history, limits) }
        #expect(history.count == 64)
        let held = history.bytes + 64 * TopicHistory.recordOverhead
        #expect(history.capacity >= held)
        #expect(history.capacity <= held + held / 5, "a ring of \(history.capacity) bytes for \(held)")
    }

    @Test("a ring's size fits 32 bits whatever the limits say, and a history keeps at most 256 MiB")
    func ringFits32Bits() {
        let huge = HistoryLimits(messages: 1 << 40, bytes: 1 << 40)
        for current in [0, 1 << 20, 3 << 30, Int(UInt32.max)] {
            let grown = TopicHistory.grownCapacity(needed: Swift.min(current, 1 << 30) + 100, records: 10, current: current, limits: huge)
            #expect(grown <= Int(UInt32.max) && grown >= Swift.min(current, 1 << 30) + 100)
        }
        #expect(TopicHistory.mostBytes == 256 << 20)
        // A message over the bound alone is not kept, however large the limits.
        let history = TopicHistory()
        // Never read: its size alone rules it out (and its pages are never touched).
        let frame = UnsafeMutableRawBufferPointer.allocate(byteCount: TopicHistory.mostBytes + 1, alignment: 1)
        defer { frame.deallocate() }
        let kept = history.append(
            UnsafeRawBufferPointer(frame),
            lineStart: 0,
            sequence: 1,
            time: PublishTime(microsecondsSinceEpoch: 1_000),
            payloadSize: 1,
            owner: Self.owner,
            limits: huge
        ) { _ in }
        #expect(!kept && history.count == 0 && history.capacity == 0)
    }

    @Test("a record leaves out the start of its frame's line and writes it back; a frame whose line starts otherwise is kept whole")
    func recordsLeaveOutTheLineStart() {
        let limits = HistoryLimits.resumable
        var history = TopicHistory()
        _ = Self.append(7, "sixteen bytes...", to: &history, limits)
        let frame = Self.frame(7, "sixteen bytes...")
        #expect(history.capacity == Self.keptSize(7, "sixteen bytes...") + TopicHistory.recordOverhead)
        #expect(history.capacity < frame.readableBytes + TopicHistory.recordOverhead)
        history.forEach(last: nil, topic: "t") { entry, kept in
            #expect(ByteBuffer(bytes: kept) == frame && entry.length == frame.readableBytes)
        }

        // Stamped with another time than its record's: the line is not what the daemon would write, so it is kept whole.
        var odd = ByteBuffer()
        odd.writeMessageFrame(
            .delivery,
            requestID: nil,
            topic: "t",
            sequence: 8,
            time: PublishTime(microsecondsSinceEpoch: 123),
            publisher: Publisher(uid: 1, pid: 2),
            payload: ByteBuffer(string: "x")
        )
        _ = odd.withUnsafeReadableBytes {
            history.append(
                $0,
                lineStart: TopicHistory.lineStart(of: $0, topic: "t", sequence: 8, time: PublishTime(microsecondsSinceEpoch: 8_000)),
                sequence: 8,
                time: PublishTime(microsecondsSinceEpoch: 8_000),
                payloadSize: 1,
                owner: Self.owner,
                limits: limits
            ) { _ in }
        }
        var frames: [ByteBuffer] = []
        history.forEach(last: nil, topic: "t") { _, kept in frames.append(ByteBuffer(bytes: kept)) }
        #expect(frames == [frame, odd])
    }

    @Test("a message over the limit alone empties the history: it stays one unbroken run")
    func oversized() {
        var history = TopicHistory()
        let limits = HistoryLimits(messages: 10, bytes: 200)
        for sequence in 1...3 as ClosedRange<UInt64> { _ = Self.append(sequence, "small", to: &history, limits) }
        _ = Self.append(4, String(repeating: "x", count: 300), to: &history, limits)
        #expect(Self.kept(history).isEmpty)
        #expect(history.lastEvicted?.sequence == 4)
        _ = Self.append(5, "after", to: &history, limits)
        #expect(Self.kept(history) == [5])
        #expect(history.payloadBytes == 5)
    }

    @Test("by time: the messages published after it")
    func byTime() {
        var history = TopicHistory()
        let limits = HistoryLimits(messages: 10, bytes: 1 << 20)
        for sequence in 1...5 as ClosedRange<UInt64> { _ = Self.append(sequence, "m", to: &history, limits) }
        var sequences: [UInt64] = []
        history.forEach(after: PublishTime(microsecondsSinceEpoch: 3_000), topic: "t") { entry, _ in sequences.append(entry.sequence) }
        #expect(sequences == [4, 5])
        var last: [UInt64] = []
        history.forEach(last: 2, topic: "t") { entry, _ in last.append(entry.sequence) }
        #expect(last == [4, 5])
    }

    @Test("random appends, removals and skips: every way of reading the ring agrees with a plain list of what is kept")
    func agreesWithAList() {
        let seed = SeededRandom.seed(default: 18)
        var random = SeededRandom(seed: seed)
        var history = TopicHistory()
        var model: [(sequence: UInt64, payload: String)] = []
        let limits = HistoryLimits(messages: 40, bytes: 6_000)
        var sequence: UInt64 = 0
        for step in 0..<4_000 {
            let roll = Int.random(in: 0..<100, using: &random)
            if roll < 85 {
                sequence += UInt64.random(in: 1...2, using: &random)  // numbers may jump, as after a restart
                let payload = String(repeating: "p", count: Int.random(in: 0..<(roll < 3 ? 7_000 : 400), using: &random))
                _ = Self.append(sequence, payload, to: &history, limits)
                if Self.keptSize(sequence, payload) > limits.bytes {
                    model.removeAll()
                } else {
                    model.append((sequence, payload))
                    while model.count > limits.messages
                        || model.map({ Self.keptSize($0.sequence, $0.payload) }).reduce(0, +) > limits.bytes
                    {
                        model.removeFirst()
                    }
                }
            } else if roll < 95, let oldest = model.first {
                let through = oldest.sequence + UInt64.random(in: 0...3, using: &random)
                history.remove(through: through) { _ in }
                model.removeAll { $0.sequence <= through }
            } else {
                sequence += 1
                history.skip(sequence: sequence, time: PublishTime(microsecondsSinceEpoch: 1_000 * sequence)) { _ in }
                model.removeAll()
            }
            let sequences = model.map(\.sequence)
            guard Self.kept(history) == sequences else {
                Issue.record("step \(step) (seed \(seed)): kept \(Self.kept(history)), expected \(sequences)")
                return
            }
            #expect(history.count == model.count)
            #expect(history.oldestSequence == sequences.first && history.newestSequence == sequences.last)
            #expect(history.payloadBytes == model.map(\.payload.utf8.count).reduce(0, +))
            #expect(history.bytes == model.map { Self.keptSize($0.sequence, $0.payload) }.reduce(0, +))
            let point = sequences.isEmpty ? sequence : sequences[Int.random(in: 0..<sequences.count, using: &random)] - 1
            #expect(Self.kept(history, after: point) == sequences.filter { $0 > point })
            #expect(history.firstSequence(after: point) == sequences.first { $0 > point })
            let inRange = sequences.first.map { $0 <= point + 1 } == true && sequences.last.map { point + 1 <= $0 } == true
            #expect(history.contains(point + 1) == inRange, "the run from the oldest to the newest")
            let wanted = Int.random(in: 0...(model.count + 1), using: &random)
            var last: [UInt64] = []
            var decoder = ServerFrameDecoder()
            let payloads = Dictionary(uniqueKeysWithValues: model.map { ($0.sequence, $0.payload) })
            history.forEach(last: wanted, topic: "t") { entry, frame in
                var input = ByteBuffer(bytes: frame)
                // Written straight into a buffer, as the state log takes it, the frame is the same.
                var written = ByteBuffer()
                history.writeFrame(of: entry, topic: "t", into: &written)
                if case .delivery(let delivery)? = try? decoder.decode(buffer: &input), delivery.sequence == entry.sequence,
                    ByteBuffer(bytes: frame) == Self.frame(entry.sequence, payloads[entry.sequence] ?? ""), entry.length == frame.count,
                    written == ByteBuffer(bytes: frame)
                {
                    last.append(entry.sequence)
                }
            }
            #expect(last == Array(sequences.suffix(wanted)))
            var newest: [UInt64] = []
            history.forEach(newestFirst: wanted) { entry in
                newest.append(entry.sequence)
                return true
            }
            #expect(newest == Array(sequences.suffix(wanted).reversed()))
            let time = PublishTime(microsecondsSinceEpoch: 1_000 * point)
            var afterTime: [UInt64] = []
            history.forEach(after: time, topic: "t") { entry, _ in afterTime.append(entry.sequence) }
            #expect(afterTime == sequences.filter { $0 > point })
        }
    }
}

extension TopicHistory {
    /// Payload bytes of the messages kept, counted by walking them. The daemon keeps no such total per history (the
    /// budgets count in ``HistoryLedger``): 8 bytes more would put every history object in the next malloc size class.
    var payloadBytes: Int {
        var total = 0
        forEach(newestFirst: nil) { entry in
            total += entry.payloadSize
            return true
        }
        return total
    }
}

/// Glibc's, which its Swift module does not export (malloc.h): the bytes a block can hold, i.e. its size class.
@_silgen_name("malloc_usable_size")
private func malloc_usable_size(_ block: UnsafeMutableRawPointer?) -> Int
