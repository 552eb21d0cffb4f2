import CLogTail
import Foundation
import NIOCore
import Testing

@testable import NotifyBroker
@testable import NotifyProtocol

/// The state log's tail written through a mapping (issue 51): what a crash leaves (records, then the zeros prepared
/// ahead) reads back whole with nothing reported, a record cut short in that space is dropped as a torn write,
/// damage before zeros is still damage, a clean close cuts the zeros off, and a page the file system fails is an
/// error the log recovers from, never a SIGBUS that kills the daemon (no socket).
@Suite("State log: the mapped tail", .timeLimit(.minutes(2)))
struct LogTailTests {
    typealias Directory = StateLogTests.Directory

    /// Commits records of `topic` to `log` until the tail has copied `count` batches through its mapping (the
    /// preparer works on a thread of its own): at most 200,000 records, so a tail that never maps fails the test.
    static func commitUntilMapped(_ log: StateLog, topic: String, count: Int = 20) throws -> UInt64 {
        var sequence: UInt64 = 0
        let mappedBefore = log.mappedWrites
        while log.mappedWrites < mappedBefore + count {
            sequence += 1
            try #require(sequence <= 200_000, "the tail copied \(log.mappedWrites - mappedBefore) batches through its mapping")
            log.appendRetained(StateLogTests.frame(topic, sequence, "payload \(sequence)"))
            try log.commit()
        }
        return sequence
    }

    /// Writes a sealed log of one record (topic `kept`, numbered `sequence`, payload "whole"), then `tail`, then
    /// 64 KiB of zeros, as a crash inside the prepared space leaves it; returns the length of the intact part.
    @discardableResult
    static func writeLog(keeping sequence: UInt64, then tail: [UInt8], in directory: Directory) throws -> Int {
        var bytes = StateLog.fileHeader(StateLogRecoveryTests.key)
        StateRecord.retained(frame: StateLogTests.frame("kept", sequence, "whole")).write(to: &bytes, sealedWith: StateLogRecoveryTests.key)
        let intact = bytes.readableBytes
        bytes.writeBytes(tail)
        bytes.writeRepeatingByte(0, count: 64 << 10)
        try StateLogRecoveryTests.write(bytes, to: directory)
        return intact
    }

    static func length(of path: String) throws -> Int {
        try FileManager.default.attributesOfItem(atPath: path)[.size] as! Int
    }

    @Test("records copied through the mapping read back after a crash: the zeros prepared after them are taken as the end, nothing is reported, the file is cut back")
    func crashLeavesZeros() throws {
        let directory = Directory()
        let copy = Directory()
        let (log, _) = try StateLog.open(directory: directory.path)
        let last = try Self.commitUntilMapped(log, topic: "tail")
        // What a kill -9 leaves: the file as the open log has it, prepared space and all.
        try FileManager.default.createDirectory(atPath: copy.path, withIntermediateDirectories: true)
        let crashed = try Data(contentsOf: URL(fileURLWithPath: directory.logPath))
        try crashed.write(to: URL(fileURLWithPath: copy.logPath))
        let records = try copy.logLength
        #expect(crashed.count > records, "space was prepared beyond the records (\(crashed.count) bytes, \(records) of records)")

        let (_, contents) = try StateLog.open(directory: copy.path)
        #expect(contents.problems.isEmpty, "\(contents.problems)")
        #expect(StateLogTests.payload(contents.topics["tail"]) == "payload \(last)")
        #expect(contents.topics["tail"]?.sequence == last)
        #expect(try Self.length(of: copy.logPath) == records, "the zeros are cut off")
        #expect(!copy.files.contains { $0.hasPrefix("state.log.damaged-") })
    }

    @Test("a record cut short while it was copied (its header, part of its body, then zeros) is dropped as a torn write; the records before it stay")
    func tornRecordBeforeZeros() throws {
        let directory = Directory()
        var torn = ByteBuffer()
        StateRecord.retained(frame: StateLogTests.frame("torn", 2, String(repeating: "t", count: 200))).write(to: &torn, sealedWith: StateLogRecoveryTests.key)
        let intact = try Self.writeLog(keeping: 1, then: Array(torn.readableBytesView.prefix(torn.readableBytes / 2)), in: directory)

        let (_, contents) = try StateLog.open(directory: directory.path)
        #expect(StateLogTests.payload(contents.topics["kept"]) == "whole")
        #expect(contents.topics["torn"] == nil)
        #expect(contents.problems.count == 1 && contents.problems[0].contains("dropped an incomplete record"), "\(contents.problems)")
        #expect(try Self.length(of: directory.logPath) == intact)
        #expect(!directory.files.contains { $0.hasPrefix("state.log.damaged-") })
    }

    @Test("damage followed by zeros is still damage: reported, the file kept aside, the sequences raised")
    func damageBeforeZeros() throws {
        let directory = Directory()
        // Past the extent of any header: bytes no torn copy of a record leaves.
        try Self.writeLog(keeping: 7, then: [UInt8](repeating: 0x41, count: 300), in: directory)

        let (_, contents) = try StateLog.open(directory: directory.path)
        #expect(StateLogTests.payload(contents.topics["kept"]) == "whole")
        #expect(contents.problems.contains { $0.contains("damaged") }, "\(contents.problems)")
        #expect(directory.files.contains { $0.hasPrefix("state.log.damaged-") })
        #expect((contents.topics["kept"]?.sequence ?? 0) > 7, "raised past what the lost bytes could have numbered")
    }

    @Test("a batch larger than the copied ones is written, not copied, among copied ones; all of it reads back")
    func largeBatchIsWritten() throws {
        let directory = Directory()
        let large = String(repeating: "L", count: 2 * LogTail.largestCopiedBatch)
        do {
            let (log, _) = try StateLog.open(directory: directory.path)
            _ = try Self.commitUntilMapped(log, topic: "small")
            let mapped = log.mappedWrites
            log.appendRetained(StateLogTests.frame("large", 1, large))
            try log.commit()
            #expect(log.mappedWrites == mapped, "the large batch went through pwrite")
            _ = try Self.commitUntilMapped(log, topic: "small", count: 1)
        }
        let (_, contents) = try StateLog.open(directory: directory.path)
        #expect(contents.problems.isEmpty, "\(contents.problems)")
        #expect(StateLogTests.payload(contents.topics["large"]) == large)
    }

    @Test("a log closed cleanly ends with its last record: the prepared space is cut off")
    func cleanCloseCutsTheTail() throws {
        let directory = Directory()
        do {
            let (log, _) = try StateLog.open(directory: directory.path)
            _ = try Self.commitUntilMapped(log, topic: "clean")
            #expect(try Self.length(of: directory.logPath) > directory.logLength, "space prepared while open")
        }
        #expect(try Self.length(of: directory.logPath) == directory.logLength)
        let (_, contents) = try StateLog.open(directory: directory.path)
        #expect(contents.problems.isEmpty, "\(contents.problems)")
    }

    @Test("a compaction moves the tail to the new file, which is mapped in its turn; what follows reads back")
    func compactionMovesTheTail() throws {
        let directory = Directory()
        do {
            let (log, _) = try StateLog.open(directory: directory.path)
            let before = try Self.commitUntilMapped(log, topic: "moved")
            try log.compact([("moved", StateLog.TopicRecord(sequence: before, retainedFrame: StateLogTests.frame("moved", before, "payload \(before)")))])
            #expect(try Self.length(of: directory.logPath) == directory.logLength, "the new file has no prepared space yet")
            _ = try Self.commitUntilMapped(log, topic: "after")
        }
        let (_, contents) = try StateLog.open(directory: directory.path)
        #expect(contents.problems.isEmpty, "\(contents.problems)")
        #expect(contents.topics["moved"] != nil && contents.topics["after"] != nil)
    }

    @Test("a page the file system fails under the mapping (the prepared space cut off behind the log's back) is written with pwrite instead: no SIGBUS, nothing lost")
    func failedPageFallsBackToWrite() throws {
        let directory = Directory()
        let last: UInt64
        do {
            let (log, _) = try StateLog.open(directory: directory.path)
            let first = try Self.commitUntilMapped(log, topic: "cut")
            // Cut off the prepared space after the page the records end in: the first copy into the next page
            // stores beyond the end of the file (SIGBUS), after its first bytes went into the last page.
            let page = Int(sysconf(Int32(_SC_PAGESIZE)))
            #expect(ftruncate(log.descriptor, off_t((try directory.logLength + page - 1) / page * page)) == 0)
            var sequence = first
            for _ in 1...200 {
                sequence += 1
                log.appendRetained(StateLogTests.frame("cut", sequence, "payload \(sequence)"))
                try log.commit()
            }
            last = sequence
        }
        let (_, contents) = try StateLog.open(directory: directory.path)
        #expect(contents.problems.isEmpty, "\(contents.problems)")
        #expect(StateLogTests.payload(contents.topics["cut"]) == "payload \(last)")
    }

    @Test("a guarded copy into a page past the end of its file returns -1, again and again, and copies where the file is")
    func guardedCopy() throws {
        #expect(notifyd_guarded_copy_install() == 0)
        let directory = Directory()
        try FileManager.default.createDirectory(atPath: directory.path, withIntermediateDirectories: true)
        let file = open(directory.path + "/mapped", O_RDWR | O_CREAT, 0o600)
        defer { close(file) }
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        #expect(ftruncate(file, off_t(page)) == 0)
        let mapping = try #require(mmap(nil, 2 * page, PROT_READ | PROT_WRITE, MAP_SHARED, file, 0))
        defer { munmap(mapping, 2 * page) }
        let bytes = [UInt8](repeating: 7, count: 64)
        for _ in 1...3 {
            #expect(bytes.withUnsafeBytes { notifyd_guarded_copy(mapping + page, $0.baseAddress, 64) } == -1)
            #expect(bytes.withUnsafeBytes { notifyd_guarded_copy(mapping, $0.baseAddress, 64) } == 0)
        }
        #expect(mapping.load(fromByteOffset: 63, as: UInt8.self) == 7)
    }
}
