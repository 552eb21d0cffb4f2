import Foundation
import NIOCore
import Testing

@testable import NotifyBus
@testable import NotifyBroker
@testable import NotifyProtocol
import TestSupport

@Suite("State log", .timeLimit(.minutes(3)))
struct StateLogTests {
    /// A fresh state directory, removed afterwards.
    final class Directory {
        let path: String
        init() {
            path = FileManager.default.temporaryDirectory.appendingPathComponent("statelog-\(UUID().uuidString)").path
        }
        deinit { try? FileManager.default.removeItem(atPath: path) }
        var logPath: String { path + "/state.log" }
        var files: [String] { (try? FileManager.default.contentsOfDirectory(atPath: path))?.sorted() ?? [] }
        /// The length of the log's records: the file up to the zeros its tail prepares ahead while it is open
        /// (`LogTail`). No record ends with a zero byte (a frame ends with its newline, the others with a topic).
        var logLength: Int {
            get throws {
                let bytes = try Data(contentsOf: URL(fileURLWithPath: logPath))
                return (bytes.lastIndex(where: { $0 != 0 }) ?? -1) + 1
            }
        }
        /// The key in the log's header.
        var key: RecordKey {
            get throws {
                let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: logPath)).prefix(StateLog.header.count + 16))
                let buffer = ByteBuffer(bytes: bytes)
                return RecordKey(
                    k0: try #require(buffer.getInteger(at: StateLog.header.count, endianness: .little)),
                    k1: try #require(buffer.getInteger(at: StateLog.header.count + 8, endianness: .little))
                )
            }
        }
    }

    static func frame(_ topic: String, _ sequence: UInt64, _ payload: String) -> ByteBuffer {
        var frame = ByteBuffer()
        frame.writeMessageFrame(
            .delivery,
            requestID: nil,
            topic: topic,
            sequence: sequence,
            time: PublishTime(microsecondsSinceEpoch: 1_795_305_600_000_000 + sequence),
            publisher: Publisher(uid: 1, pid: 2),
            payload: ByteBuffer(string: payload)
        )
        return frame
    }

    static func payload(_ record: StateLog.TopicRecord?) -> String? {
        guard var frame = record?.retainedFrame else { return nil }
        var decoder = ServerFrameDecoder()
        guard case .delivery(let delivery)? = try? decoder.decode(buffer: &frame) else { return nil }
        return delivery.text
    }

    @Test("what is committed is there after reopening")
    func roundTrip() throws {
        let directory = Directory()
        do {
            let (log, contents) = try StateLog.open(directory: directory.path)
            #expect(contents.topics.isEmpty && contents.problems.isEmpty)
            log.appendRetained(Self.frame("a", 1, "first"))
            log.appendRetained(Self.frame("a", 2, "second"))
            log.appendRetained(Self.frame("b", 1, "kept"))
            log.appendSequence("b", 1_001)
            log.appendRetained(Self.frame("c", 5, "gone"))
            log.appendCleared("c")
            try log.commit()
        }
        let (_, contents) = try StateLog.open(directory: directory.path)
        #expect(contents.problems.isEmpty)
        #expect(Self.payload(contents.topics["a"]) == "second" && contents.topics["a"]?.sequence == 2)
        #expect(Self.payload(contents.topics["b"]) == "kept" && contents.topics["b"]?.sequence == 1_001)
        #expect(contents.topics["c"]?.retainedFrame == nil && contents.topics["c"]?.sequence == 5)
    }

    @Test("a record cut short at the end is dropped and the log goes on from the last whole record")
    func tornTail() throws {
        let directory = Directory()
        do {
            let (log, _) = try StateLog.open(directory: directory.path)
            log.appendRetained(Self.frame("t", 1, "whole"))
            try log.commit()
        }
        // A crash in the middle of the next write: only part of a record reached the file.
        var partial = ByteBuffer()
        StateRecord.retained(frame: Self.frame("t", 2, "torn")).write(to: &partial, sealedWith: try directory.key)
        let handle = try #require(FileHandle(forWritingAtPath: directory.logPath))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(partial.readableBytesView.prefix(partial.readableBytes - 3)))
        try handle.close()

        do {
            let (log, contents) = try StateLog.open(directory: directory.path)
            #expect(Self.payload(contents.topics["t"]) == "whole")
            #expect(contents.problems.count == 1 && contents.problems[0].contains("incomplete record"))
            #expect(contents.keptAside == nil, "a torn tail is expected after a crash: nothing to keep aside")
            log.appendRetained(Self.frame("t", 3, "after"))
            try log.commit()
        }
        let (_, contents) = try StateLog.open(directory: directory.path)
        #expect(contents.problems.isEmpty, "appends continued on a record boundary")
        #expect(Self.payload(contents.topics["t"]) == "after")
    }

    @Test("damage inside the file is reported, the file is kept aside whole, and reading goes on after the damage")
    func damage() throws {
        let directory = Directory()
        do {
            let (log, _) = try StateLog.open(directory: directory.path)
            log.appendRetained(Self.frame("one", 1, "before the damage"))
            log.appendRetained(Self.frame("two", 1, "damaged"))
            log.appendRetained(Self.frame("three", 1, "after the damage"))
            try log.commit()
        }
        var bytes = try Data(contentsOf: URL(fileURLWithPath: directory.logPath))
        let original = bytes
        let damaged = try #require(bytes.range(of: Data("damaged".utf8)))
        bytes[damaged.lowerBound] ^= 0xFF
        try bytes.write(to: URL(fileURLWithPath: directory.logPath))

        let (_, contents) = try StateLog.open(directory: directory.path)
        #expect(Self.payload(contents.topics["one"]) == "before the damage")
        #expect(contents.topics["two"] == nil, "a damaged record is never loaded")
        #expect(Self.payload(contents.topics["three"]) == "after the damage", "what follows the damage is loaded")
        #expect(contents.problems.contains { $0.contains("could not be read") })
        let aside = try #require(contents.keptAside)
        #expect(try Data(contentsOf: URL(fileURLWithPath: aside)) == bytes, "the damaged file is kept, byte for byte")
        #expect(bytes != original)
        let (_, reopened) = try StateLog.open(directory: directory.path)
        #expect(reopened.problems.isEmpty, "a clean log was written from what could be read")
        #expect(Set(reopened.topics.keys) == ["one", "three"])
    }

    @Test("a file that is not a state log is kept aside, not deleted")
    func notAStateLog() throws {
        let directory = Directory()
        try FileManager.default.createDirectory(atPath: directory.path, withIntermediateDirectories: true)
        try Data("precious".utf8).write(to: URL(fileURLWithPath: directory.logPath))
        let (_, contents) = try StateLog.open(directory: directory.path)
        #expect(contents.topics.isEmpty)
        let aside = try #require(contents.keptAside)
        #expect(try Data(contentsOf: URL(fileURLWithPath: aside)) == Data("precious".utf8))
    }

    @Test("a state directory in use is refused (after waiting a moment for a daemon that is exiting), and free again once closed")
    func lockedDirectory() throws {
        let directory = Directory()
        do {
            let (held, _) = try StateLog.open(directory: directory.path)
            #expect(throws: StateLogError.self) { _ = try StateLog.open(directory: directory.path) }
            do {
                _ = try StateLog.open(directory: directory.path)
            } catch {
                #expect("\(error)".contains("another notifyd uses the state directory"))
            }
            withExtendedLifetime(held) {}
        }
        _ = try StateLog.open(directory: directory.path)
    }

    @Test("compaction rewrites the log to what is live")
    func compaction() throws {
        let directory = Directory()
        do {
            let (log, _) = try StateLog.open(directory: directory.path)
            let big = String(repeating: "x", count: 4_000)
            for sequence in 1...4_500 {  // 18 MB: past the size below which the log is never compacted
                log.appendRetained(Self.frame("hot", UInt64(sequence), big))
                try log.commit()
            }
            log.setLiveSize(4_100)
            #expect(log.wantsCompaction)
            try log.compact([("hot", StateLog.TopicRecord(sequence: 4_500, retainedFrame: Self.frame("hot", 4_500, big)))])
            #expect(!log.wantsCompaction)
            let size = try directory.logLength
            #expect(size < 5_000)
            #expect(!directory.files.contains("state.log.tmp"))
        }
        let (_, contents) = try StateLog.open(directory: directory.path)
        #expect(contents.topics["hot"]?.sequence == 4_500)
    }

    @Test("a compaction goes to the file a chunk at a time: a log of megabytes is rewritten holding one, and reads back whole")
    func compactionInChunks() throws {
        let directory = Directory()
        let payload = String(repeating: "y", count: 1_000)
        // 200 topics of 20 history messages of 1 KB and a buffered one: 4 MB of records.
        let topics = (0..<200).map { index in
            let name = "t\(index)"
            let history = (1...20).map { Self.frame(name, UInt64($0), payload) }
            return (name, StateLog.TopicRecord(sequence: 20, retainedFrame: history.last, history: history))
        }
        do {
            let (log, _) = try StateLog.open(directory: directory.path)
            try log.compact(topics)
            #if DEBUG
            #expect(log.lastCompactionMostWaiting >= StateLog.Snapshot.chunkSize)
            #expect(log.lastCompactionMostWaiting < StateLog.Snapshot.chunkSize + 2_000, "a chunk and one record at most")
            #endif
            let size = try directory.logLength
            #expect(size > 4 * StateLog.Snapshot.chunkSize)
        }
        let (_, contents) = try StateLog.open(directory: directory.path)
        #expect(contents.problems.isEmpty, "\(contents.problems)")
        #expect(contents.topics.count == 200)
        for (name, record) in topics {
            #expect(contents.topics[name]?.sequence == 20)
            #expect(contents.topics[name]?.history == record.history, "\(name)")
            #expect(contents.topics[name]?.retainedFrame == record.retainedFrame, "\(name)")
        }
    }

    @Test("two daemons cannot share a state directory")
    func exclusive() throws {
        let directory = Directory()
        let (first, _) = try StateLog.open(directory: directory.path)
        #expect(throws: StateLogError.self) { try StateLog.open(directory: directory.path) }
        _ = first
    }

    @Test("through the broker: buffered messages and sequences survive a clean restart and a crash")
    func brokerRestarts() throws {
        let directory = Directory()
        var lastSequence: UInt64 = 0
        do {
            let harness = BrokerHarness()
            let (log, contents) = try StateLog.open(directory: directory.path)
            harness.broker.attach(log, restoring: contents)
            let client = harness.connect()
            client.send("PUB kept 3\nold\nPUB kept 3\nnew\nPUB once 1 noretain\nx\nPUB gone 1\nx\nCLEAR gone\n")
            try harness.broker.saveState()
        }
        do {
            let harness = BrokerHarness()
            let (log, contents) = try StateLog.open(directory: directory.path)
            #expect(contents.problems.isEmpty)
            harness.broker.attach(log, restoring: contents)
            let client = harness.connect()
            client.send("#1 LATEST kept\n#2 LATEST gone\n#3 PUB once 1 noretain ack\nx\n")
            let frames = try client.received()
            guard case .latest(_, let kept) = frames[0] else { Issue.record("no LAST: \(frames)"); return }
            #expect(kept.text == "new" && kept.sequence == 2)
            #expect(errorCode(frames[1]) == .notFound)
            #expect(frames[2] == .ok(requestID: 3, value: 2), "a clean restart continues the sequence exactly")
            // Now a crash: the records reach the file, but saveState never runs.
            client.send("PUB once 1 noretain\nx\n#4 PUB once 1 ack noretain\nx\n")
            guard case .ok(_, let value?) = try client.received().last else { Issue.record("no ack"); return }
            lastSequence = value
            #expect(lastSequence == 4)
        }
        let harness = BrokerHarness()
        let (log, contents) = try StateLog.open(directory: directory.path)
        harness.broker.attach(log, restoring: contents)
        let client = harness.connect()
        client.send("#5 PUB once 1 ack\nx\nLATEST kept\n")
        let frames = try client.received()
        guard case .ok(_, let next?) = frames[0] else { Issue.record("no ack: \(frames)"); return }
        #expect(next > lastSequence, "after a crash the sequence jumps ahead, never back")
        #expect(next <= lastSequence + Broker.sequenceReserve + 1)
        guard case .latest(_, let kept) = frames[1] else { Issue.record("no LAST"); return }
        #expect(kept.text == "new")
    }

    @Test("sync=always syncs once per batch, before the batch's acks are flushed; sync=never never syncs")
    func syncPolicy() throws {
        for policy in [StateLog.SyncPolicy.always, .never] {
            let directory = Directory()
            let harness = BrokerHarness()
            let (log, contents) = try StateLog.open(directory: directory.path, syncPolicy: policy)
            harness.broker.attach(log, restoring: contents)
            let client = harness.connect()
            var syncsSeenAtFlush: [Int] = []
            client.transport.onFlush = { syncsSeenAtFlush.append(log.syncs) }

            client.send("#1 PUB a 1 ack\nx\n#2 PUB b 1 ack\ny\n#3 PUB c 1 ack\nz\n")
            #expect(try client.received().count == 3)
            client.send("#4 PUB a 1 ack\nw\n")
            client.send("#5 LATEST a\n")
            _ = try client.received()

            let expected = policy == .always ? [1, 2, 2] : [0, 0, 0]
            #expect(syncsSeenAtFlush == expected, "\(policy): syncs seen as each batch's replies left")
            #expect(log.syncs == expected.last)
        }
    }

    @Test("sync=never: a message is in the log before any subscriber is sent it, acknowledged or not, retained or not")
    func loggedBeforeDelivery() throws {
        let directory = Directory()
        let harness = BrokerHarness()
        let (log, contents) = try StateLog.open(directory: directory.path, syncPolicy: .never)
        harness.broker.attach(log, restoring: contents)
        let subscriber = harness.connect()
        subscriber.send("#1 SUB t.*\n")
        _ = try subscriber.received()
        let publisher = harness.connect()
        let logSize = { try directory.logLength }
        var sizeAtDelivery: [Int] = []
        subscriber.transport.onFlush = { sizeAtDelivery.append((try? logSize()) ?? -1) }
        // A kill -9 right after a delivery must not let a restart number another message as the one delivered, nor
        // leave it out of the history a subscriber resumes from.
        for publish in ["PUB t.history 1 noretain\nx\n", "PUB t.retained 1\ny\n"] {
            let before = try logSize()
            publisher.send(publish)
            #expect(sizeAtDelivery.last.map { $0 > before } == true, "\(publish): the log grew before the delivery left")
        }
        #expect(try subscriber.received().count == 2)
    }

    @Test("a batch logs each changed topic once, in its final state")
    func batchLogsFinalState() throws {
        let directory = Directory()
        do {
            // Without history, which logs each message it keeps (see "History on disk").
            var configuration = BrokerConfiguration.default
            configuration.history = .off
            let harness = BrokerHarness(configuration: configuration)
            let (log, contents) = try StateLog.open(directory: directory.path)
            harness.broker.attach(log, restoring: contents)
            let client = harness.connect()
            client.send("PUB once 5\nfirst\n")
            let oneRecord = try directory.logLength
            let batch = (1...100).map { "PUB hot 3\n\(String(format: "%03d", $0))\n" }.joined()
            client.send(batch + "PUB gone 1\nx\nCLEAR gone\nCLEAR back\nPUB back 4\nback\n")
            let after = try directory.logLength
            #expect(after - oneRecord < 4 * (oneRecord + 16), "hot, gone and back: one record each, not 100 for hot")
        }
        let harness = BrokerHarness()
        let (log, contents) = try StateLog.open(directory: directory.path)
        harness.broker.attach(log, restoring: contents)
        #expect(Self.payload(contents.topics["hot"]) == "100")
        #expect(contents.topics["hot"]?.sequence == 100)
        #expect(contents.topics["gone"]?.retainedFrame == nil, "published, then cleared in the same batch")
        #expect(Self.payload(contents.topics["back"]) == "back", "cleared, then published in the same batch")
        #expect(Self.payload(contents.topics["once"]) == "first")
    }

    @Test("CRC-32 gives the standard check value, and continuing a checksum equals checksumming the whole")
    func crc32() {
        let check = Array("123456789".utf8)
        #expect(check.withUnsafeBytes { CRC32.checksum($0) } == 0xCBF4_3926)
        // Against the byte-at-a-time definition, at every length and split around the 8-byte steps.
        func reference(_ bytes: [UInt8]) -> UInt32 {
            var value: UInt32 = 0xFFFF_FFFF
            for byte in bytes {
                value ^= UInt32(byte)
                for _ in 0..<8 { value = value & 1 == 1 ? 0xEDB8_8320 ^ (value >> 1) : value >> 1 }
            }
            return ~value
        }
        var random = SeededRandom(seed: 7)
        for length in 0..<40 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &random) }
            #expect(bytes.withUnsafeBytes { CRC32.checksum($0) } == reference(bytes), "length \(length)")
            let split = length / 3
            let continued = bytes.withUnsafeBytes { all in
                CRC32.checksum(UnsafeRawBufferPointer(rebasing: all[split...]), continuing: CRC32.checksum(UnsafeRawBufferPointer(rebasing: all[..<split])))
            }
            #expect(continued == reference(bytes), "length \(length) split at \(split)")
        }
    }
}

/// Issue 14, "Recovery that loses or forges data" and "Directory fsyncs".
@Suite("State log recovery", .timeLimit(.minutes(3)))
struct StateLogRecoveryTests {
    typealias Directory = StateLogTests.Directory

    /// The key the logs these tests write by hand are sealed with.
    static let key = RecordKey(k0: 0x0123_4567_89AB_CDEF, k1: 0xFEDC_BA98_7654_3210)

    static func write(_ records: [StateRecord], to directory: Directory) throws {
        var bytes = StateLog.fileHeader(key)
        for record in records { record.write(to: &bytes, sealedWith: key) }
        try write(bytes, to: directory)
    }

    static func write(_ bytes: ByteBuffer, to directory: Directory) throws {
        try FileManager.default.createDirectory(atPath: directory.path, withIntermediateDirectories: true)
        try Data(bytes.readableBytesView).write(to: URL(fileURLWithPath: directory.logPath))
    }

    /// A record as the first releases wrote it: a CRC-32 anyone can compute where format 2 has its seals.
    static func writeFormat1(_ record: StateRecord, to buffer: inout ByteBuffer) {
        var body = ByteBuffer()
        switch record {
        case .retained(let frame), .history(let frame): body.writeImmutableBuffer(frame)
        case .sequence(let topic, let sequence):
            body.writeInteger(sequence, endianness: .little)
            body.writeString(topic)
        case .cleared(let topic): body.writeString(topic)
        case .forgotten, .retainedInHistory: preconditionFailure("format 1 had no record of forgotten topics or retained history")
        }
        let kind = record.kind
        let checksum = body.withUnsafeReadableBytes { body in
            withUnsafeBytes(of: kind) { CRC32.checksum(body, continuing: CRC32.checksum($0)) }
        }
        buffer.writeInteger(StateRecord.marker)
        buffer.writeInteger(kind)
        buffer.writeInteger(UInt32(body.readableBytes), endianness: .little)
        buffer.writeInteger(checksum, endianness: .little)
        buffer.writeImmutableBuffer(body)
    }

    static var rootFrame: ByteBuffer {
        var frame = ByteBuffer()
        frame.writeMessageFrame(
            .delivery,
            requestID: nil,
            topic: "system.shutdown",
            sequence: 1,
            time: PublishTime(microsecondsSinceEpoch: 1_795_305_600_000_000),
            publisher: Publisher(uid: 0, pid: 1),
            payload: ByteBuffer(string: "now")
        )
        return frame
    }

    @Test("a record cut short in the middle, with whole records after it, is damage: the file is kept, not cut there")
    func cutShortInTheMiddle() throws {
        let directory = Directory()
        var middle = ByteBuffer()
        StateRecord.retained(frame: StateLogTests.frame("two", 1, String(repeating: "c", count: 10_000))).write(to: &middle, sealedWith: Self.key)
        var bytes = StateLog.fileHeader(Self.key)
        StateRecord.retained(frame: StateLogTests.frame("one", 1, "before")).write(to: &bytes, sealedWith: Self.key)
        // The record's header says more bytes than the file has left: read alone, it looks like a torn end.
        bytes.writeBytes(middle.readableBytesView.prefix(22))
        StateRecord.retained(frame: StateLogTests.frame("three", 1, "after")).write(to: &bytes, sealedWith: Self.key)
        try Self.write(bytes, to: directory)

        let (_, contents) = try StateLog.open(directory: directory.path)
        #expect(StateLogTests.payload(contents.topics["one"]) == "before")
        #expect(StateLogTests.payload(contents.topics["three"]) == "after", "the whole record after the damage is read")
        let aside = try #require(contents.keptAside, "damage, not a torn end: the file is kept aside")
        #expect(try Data(contentsOf: URL(fileURLWithPath: aside)) == Data(bytes.readableBytesView))
    }

    @Test("a record a client wrote into a payload is never loaded, even when damage before it sends the reader looking")
    func forgedRecord() throws {
        let directory = Directory()
        // The client does not know the log's key: the best it can do is a record sealed with another.
        var forged = ByteBuffer()
        StateRecord.retained(frame: Self.rootFrame).write(to: &forged, sealedWith: .random())
        let carrier = StateLogTests.frame("user.1000.note", 1, String(buffer: forged))
        try Self.write([.retained(frame: carrier), .retained(frame: StateLogTests.frame("t", 1, "x"))], to: directory)
        // Damage the carrier's marker: the reader searches on, past the forged record inside its payload.
        var bytes = try Data(contentsOf: URL(fileURLWithPath: directory.logPath))
        bytes[StateLog.fileHeader(Self.key).readableBytes] ^= 0xFF
        try bytes.write(to: URL(fileURLWithPath: directory.logPath))

        let (_, contents) = try StateLog.open(directory: directory.path)
        #expect(contents.topics["system.shutdown"] == nil, "the forged record was not loaded")
        #expect(StateLogTests.payload(contents.topics["t"]) == "x", "the daemon's own record after it was")
        #expect(contents.keptAside != nil)
    }

    @Test("a log of format 1 is read and rewritten sealed; past damage in it nothing is loaded, since anyone can forge its records")
    func formatOne() throws {
        let directory = Directory()
        var forged = ByteBuffer()
        Self.writeFormat1(.retained(frame: Self.rootFrame), to: &forged)
        var bytes = ByteBuffer(bytes: StateLog.firstHeader)
        Self.writeFormat1(.retained(frame: StateLogTests.frame("kept", 7, "old")), to: &bytes)
        Self.writeFormat1(.sequence(topic: "kept", 9), to: &bytes)
        let damageAt = bytes.writerIndex
        Self.writeFormat1(.retained(frame: StateLogTests.frame("user.1000.note", 1, String(buffer: forged))), to: &bytes)
        bytes.setInteger(UInt8(0), at: damageAt)
        try StateLogRecoveryTests.write(bytes, to: directory)

        do {
            let (log, contents) = try StateLog.open(directory: directory.path)
            #expect(StateLogTests.payload(contents.topics["kept"]) == "old" && contents.topics["kept"]?.sequence == 9)
            #expect(contents.topics["system.shutdown"] == nil, "nothing past damage in a format 1 log")
            #expect(contents.problems.contains { $0.contains("format 1") })
            log.appendRetained(StateLogTests.frame("kept", 10, "new"))
            try log.commit()
        }
        let file = try Data(contentsOf: URL(fileURLWithPath: directory.logPath))
        #expect(file.prefix(StateLog.header.count) == Data(StateLog.header), "rewritten in format 2")
        let (_, reopened) = try StateLog.open(directory: directory.path)
        #expect(reopened.problems.isEmpty)
        #expect(StateLogTests.payload(reopened.topics["kept"]) == "new")
    }

    @Test("an intact format 1 log is upgraded in place, with nothing lost and nothing kept aside")
    func formatOneUpgrade() throws {
        let directory = Directory()
        var bytes = ByteBuffer(bytes: StateLog.firstHeader)
        Self.writeFormat1(.retained(frame: StateLogTests.frame("a", 3, "three")), to: &bytes)
        Self.writeFormat1(.sequence(topic: "b", 1_000), to: &bytes)
        try Self.write(bytes, to: directory)
        do {
            let (_, contents) = try StateLog.open(directory: directory.path)
            #expect(contents.problems.isEmpty && contents.keptAside == nil)
        }
        let (_, reopened) = try StateLog.open(directory: directory.path)
        #expect(StateLogTests.payload(reopened.topics["a"]) == "three" && reopened.topics["a"]?.sequence == 3)
        #expect(reopened.topics["b"]?.sequence == 1_000)
        #expect(directory.files == ["state.lock", "state.log"])
    }

    @Test("records lost to damage raise every topic's sequence past what they could have held: a gap, never a repeat")
    func sequencesAfterLostRecords() throws {
        let directory = Directory()
        var bytes = StateLog.fileHeader(Self.key)
        StateRecord.sequence(topic: "t", 1_000).write(to: &bytes, sealedWith: Self.key)
        // Ceilings that are then lost: the topic gave out numbers up to 4,000.
        let lostFrom = bytes.writerIndex
        for ceiling in [2_000, 3_000, 4_000] as [UInt64] {
            StateRecord.sequence(topic: "t", ceiling).write(to: &bytes, sealedWith: Self.key)
        }
        let lostTo = bytes.writerIndex
        StateRecord.retained(frame: StateLogTests.frame("other", 1, "after")).write(to: &bytes, sealedWith: Self.key)
        for offset in lostFrom..<lostTo { bytes.setInteger(UInt8(0x5A), at: offset) }
        try Self.write(bytes, to: directory)

        let (_, contents) = try StateLog.open(directory: directory.path)
        #expect(try #require(contents.topics["t"]?.sequence) >= 4_000)
        #expect(try #require(contents.topics["other"]?.sequence) > 1, "every topic: any one may have had records in the gap")
        #expect(StateLogTests.payload(contents.topics["other"]) == "after")
    }

    @Test("damage in a record's body skips that record whole, even a record of this log inside its payload")
    func damagedBody() throws {
        let directory = Directory()
        var bytes = StateLog.fileHeader(Self.key)
        let body = bytes.writerIndex + StateRecord.Format.sealed(Self.key).headerSize + 40
        // Its payload holds a record sealed with this log's key (root published a copy of the log, say): the reader
        // knows where the damaged record ends, from its intact header, and never looks inside it.
        var lookalike = ByteBuffer()
        StateRecord.cleared(topic: "t").write(to: &lookalike, sealedWith: Self.key)
        StateRecord.retained(frame: StateLogTests.frame("damaged", 1, String(repeating: "\u{A5}", count: 64) + String(buffer: lookalike)))
            .write(to: &bytes, sealedWith: Self.key)
        bytes.setInteger(UInt8(0), at: body)
        bytes.writeRepeatingByte(StateRecord.marker, count: 4_096)
        StateRecord.retained(frame: StateLogTests.frame("next", 2, "intact")).write(to: &bytes, sealedWith: Self.key)
        try Self.write(bytes, to: directory)

        let (_, contents) = try StateLog.open(directory: directory.path)
        #expect(contents.topics["damaged"] == nil && contents.topics["t"] == nil)
        #expect(StateLogTests.payload(contents.topics["next"]) == "intact")
        #expect(contents.problems.count == 1, "one stretch: the damaged record, then the marker bytes: \(contents.problems)")
    }

    @Test("SipHash-2-4 gives the reference vectors")
    func sipHash() {
        // From the SipHash paper's vectors: key 00 01 … 0f, message 00 01 … (n - 1).
        let hash = SipHash(k0: 0x0706_0504_0302_0100, k1: 0x0F0E_0D0C_0B0A_0908)
        let word: UInt64 = 0x0706_0504_0302_0100
        #expect(hash.hash(word: word) == 0x93F5_F579_9A93_2462)
        let rest: [UInt8] = Array(8..<15)
        #expect(rest.withUnsafeBytes { hash.hash(word: word, $0) } == 0xA129_CA61_49BE_45E5)
    }

    @Test("two damaged logs in one second are both kept aside, under names of their own")
    func uniqueAsideNames() throws {
        let directory = Directory()
        var kept: [String] = []
        for text in ["first", "second"] {
            try Self.write([.retained(frame: StateLogTests.frame("t", 1, text))], to: directory)
            var bytes = try Data(contentsOf: URL(fileURLWithPath: directory.logPath))
            bytes.append(contentsOf: [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF])
            bytes.append(contentsOf: Data(repeating: 0x41, count: 64))
            try bytes.write(to: URL(fileURLWithPath: directory.logPath))
            let (_, contents) = try StateLog.open(directory: directory.path)
            kept.append(try #require(contents.keptAside))
        }
        #expect(kept[0] != kept[1])
        for (index, text) in ["first", "second"].enumerated() {
            let aside = try Data(contentsOf: URL(fileURLWithPath: kept[index]))
            #expect(aside.range(of: Data(text.utf8)) != nil, "each damaged log is kept whole")
        }
        #expect(!directory.files.contains("state.log.tmp"))
    }

    @Test("an unfinished state.log.tmp of a rewrite that died is removed at start")
    func staleTemporary() throws {
        let directory = Directory()
        try Self.write([.retained(frame: StateLogTests.frame("t", 1, "kept"))], to: directory)
        try Data("half a rewrite".utf8).write(to: URL(fileURLWithPath: directory.logPath + ".tmp"))
        let (_, contents) = try StateLog.open(directory: directory.path)
        #expect(StateLogTests.payload(contents.topics["t"]) == "kept")
        #expect(!directory.files.contains("state.log.tmp"))
    }

    @Test("a sequence number near UInt64.max in the log is refused, and publishing to its topic goes on")
    func outOfRangeSequence() throws {
        let directory = Directory()
        try Self.write([.sequence(topic: "t", UInt64.max - 1)], to: directory)
        let harness = BrokerHarness()
        let (log, contents) = try StateLog.open(directory: directory.path)
        #expect(contents.problems.contains { $0.contains("out of range") })
        harness.broker.attach(log, restoring: contents)
        let client = harness.connect()
        client.send("#1 PUB t 1 ack\nx\n#2 PUB t 1 noretain ack\ny\n")
        #expect(try client.received() == [.ok(requestID: 1, value: 1), .ok(requestID: 2, value: 2)])
    }
}
