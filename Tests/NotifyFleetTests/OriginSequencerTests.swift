import Foundation
import NATSClient
import NIOCore
import NotifyProtocol
import Testing

@testable import NotifyFleet

/// Which live messages a receiver takes at once and which wait for the log, without a server: messages are strings,
/// records are lists of them.
@Suite("Origin sequencer: live numbers, gaps and the log", .timeLimit(.minutes(3)))
struct OriginSequencerTests {
    typealias Sequencer = OriginSequencer<String>
    static let run: UInt64 = 1_000

    static func stamp(_ number: UInt64, run: UInt64 = Self.run) -> ExportStamp { ExportStamp(epoch: run, number: number) }

    /// An origin this host stands at `taken` in.
    static func following(taken: UInt64, log: UInt64 = 10) -> Sequencer {
        Sequencer(positions: ["alpha": OriginPosition(epoch: run, taken: taken, logSequence: log)])
    }

    static func record(_ numbers: ClosedRange<UInt64>, run: UInt64 = Self.run) -> [(message: String, stamp: ExportStamp?)] {
        numbers.map { ("m\($0)", stamp($0, run: run)) }
    }

    @Test("the next number is taken at once; a repeat or an earlier run's is dropped; the position moves with what is taken")
    func inOrder() {
        var sequencer = Self.following(taken: 4)
        #expect(sequencer.live("m5", host: "alpha", stamp: Self.stamp(5), logSequence: 12, size: 1) == .take)
        #expect(sequencer.live("m5", host: "alpha", stamp: Self.stamp(5), logSequence: 12, size: 1) == .repeated)
        #expect(sequencer.live("m9", host: "alpha", stamp: Self.stamp(9, run: Self.run - 1), logSequence: 12, size: 1) == .repeated)
        #expect(sequencer.position(of: "alpha") == OriginPosition(epoch: Self.run, taken: 5, logSequence: 12))
    }

    @Test("a gap holds what comes after it and asks for a read from where this host stands; the log fills the gap in order, then what waited follows, once")
    func gapRepairedFromTheLog() {
        var sequencer = Self.following(taken: 4)
        #expect(sequencer.live("m8", host: "alpha", stamp: Self.stamp(8), logSequence: 13, size: 1) == .held(readFrom: 10))
        #expect(sequencer.live("m9", host: "alpha", stamp: Self.stamp(9), logSequence: 13, size: 1) == .held(readFrom: nil), "one read at a time")
        #expect(sequencer.needsMore("alpha"))
        let applied = sequencer.apply(record: 14, of: "alpha", entries: Self.record(3...8))
        #expect(applied.take == ["m5", "m6", "m7", "m8", "m9"], "the log's, then the held one that is next; m8 once")
        #expect(applied.missed == 0)
        #expect(!sequencer.needsMore("alpha"))
        #expect(sequencer.heldMessages == 0 && sequencer.repairs == 0)
        #expect(sequencer.live("m10", host: "alpha", stamp: Self.stamp(10), logSequence: 14, size: 1) == .take)
    }

    @Test("numbers the log no longer holds are missed once the read ends, counted once; a new run starts its numbers again")
    func missedAndNewRun() {
        var sequencer = Self.following(taken: 4)
        _ = sequencer.live("m20", host: "alpha", stamp: Self.stamp(20), logSequence: 30, size: 1)
        // After the gap, the log's messages wait: the records before them may come later in the log.
        let applied = sequencer.apply(record: 31, of: "alpha", entries: Self.record(15...20))
        #expect(applied.take.isEmpty && applied.missed == 0)
        #expect(sequencer.needsMore("alpha"))
        // The read ends without them: 5 to 14 are gone, the rest taken in order, the live copy of m20 dropped.
        let settled = sequencer.giveUpCounting("alpha")
        #expect(settled.missed == 10)
        #expect(settled.released == (15...20).map { "m\($0)" })
        #expect(sequencer.unconfirmed == 0 && sequencer.heldMessages == 0)
        // The origin started again: its new run's numbers from 1; what the log lacks of the new run is missed.
        _ = sequencer.live("n3", host: "alpha", stamp: Self.stamp(3, run: Self.run + 1), logSequence: 40, size: 1)
        let newer = sequencer.apply(record: 41, of: "alpha", entries: [("n2", Self.stamp(2, run: Self.run + 1)), ("n3", Self.stamp(3, run: Self.run + 1))])
        #expect(newer.take.isEmpty)
        let started = sequencer.giveUpCounting("alpha")
        #expect(started.missed == 1 && started.released == ["n2", "n3"])
        #expect(sequencer.position(of: "alpha")?.epoch == Self.run + 1)
    }

    @Test("an origin's records stored out of order (one refused, a later one taken, the first sent again) give each message once, in order, nothing missed")
    func recordsOutOfOrder() {
        var sequencer = Self.following(taken: 4)
        _ = sequencer.live("m9", host: "alpha", stamp: Self.stamp(9), logSequence: 10, size: 1)
        #expect(sequencer.apply(record: 11, of: "alpha", entries: Self.record(8...9)).take.isEmpty)
        let late = sequencer.apply(record: 12, of: "alpha", entries: Self.record(5...7))
        #expect(late.take == ["m5", "m6", "m7", "m8", "m9"] && late.missed == 0)
        #expect(!sequencer.needsMore("alpha"))
    }

    @Test("forged numbers: far ahead, or a run the log never shows, never hold the real origin back, and are let go of without moving the position; a record's implausible jump is refused")
    func forgedNumbers() {
        var sequencer = Self.following(taken: 4)
        #expect(sequencer.live("forged", host: "alpha", stamp: Self.stamp(1_000_000), logSequence: 99_999, size: 1) == .held(readFrom: 10))
        #expect(sequencer.live("m5", host: "alpha", stamp: Self.stamp(5), logSequence: 12, size: 1) == .take, "the real host goes on while the read runs")
        // The log shows nothing of it: given up after the patience, let go of, the position where the real host is.
        #expect(sequencer.giveUp("alpha").isEmpty)
        #expect(sequencer.unconfirmed == 1 && sequencer.heldMessages == 0)
        #expect(sequencer.position(of: "alpha")?.taken == 5)
        // A run the log never shows: the same.
        _ = sequencer.live("run", host: "alpha", stamp: ExportStamp(epoch: .max, number: 1), logSequence: 12, size: 1)
        #expect(sequencer.giveUp("alpha").isEmpty && sequencer.position(of: "alpha")?.epoch == Self.run)
        // A record claiming a jump of more than 2^32 is no real loss.
        _ = sequencer.live("m7", host: "alpha", stamp: Self.stamp(7), logSequence: 12, size: 1)
        let applied = sequencer.apply(record: 15, of: "alpha", entries: [("huge", Self.stamp(1 << 40)), ("m6", Self.stamp(6))])
        #expect(applied.take == ["m6", "m7"] && applied.missed == 0, "\(applied.take)")
        #expect(sequencer.implausible == 1)
        // An origin met only through a forgery is forgotten when given up.
        _ = sequencer.live("x", host: "mallory", stamp: Self.stamp(3), logSequence: 5, size: 1)
        #expect(sequencer.giveUp("mallory").isEmpty)
        #expect(sequencer.positions["mallory"] == nil)
    }

    @Test("an origin met for the first time starts with its first live message, once the log shows it; older messages in the record are not its to take")
    func newOrigin() {
        var sequencer = Sequencer()
        #expect(sequencer.live("m7", host: "beta", stamp: Self.stamp(7), logSequence: 20, size: 1) == .held(readFrom: 20))
        let applied = sequencer.apply(record: 21, of: "beta", entries: Self.record(5...7))
        #expect(applied.take == ["m7"] && applied.missed == 0)
        #expect(sequencer.position(of: "beta") == OriginPosition(epoch: Self.run, taken: 7, logSequence: 21))
    }

    @Test("catch-up holds every live message until the log's end, then takes what is next and reads the log of an origin that still lacks some")
    func catchUp() {
        var sequencer = Self.following(taken: 4)
        sequencer.beginCatchUp()
        #expect(sequencer.live("m9", host: "alpha", stamp: Self.stamp(9), logSequence: 12, size: 1) == .held(readFrom: nil))
        #expect(sequencer.apply(record: 11, of: "alpha", entries: Self.record(5...6)).take == ["m5", "m6"])
        let ended = sequencer.endCatchUp(through: 11)
        #expect(ended.take.isEmpty)
        #expect(ended.reads.map(\.host) == ["alpha"] && ended.reads.first?.from == 11)
        #expect(sequencer.apply(record: 12, of: "alpha", entries: Self.record(7...9)).take == ["m7", "m8", "m9"])
        #expect(!sequencer.needsMore("alpha"))
    }

    @Test("a head past where this host stands asks for a read; what the log no longer holds is missed, and the position moves to the head")
    func head() {
        var sequencer = Self.following(taken: 4)
        #expect(sequencer.expect("alpha", through: Self.stamp(10)) == 10)
        #expect(sequencer.waitsOnlyForHead("alpha"))
        let settled = sequencer.giveUpCounting("alpha")
        #expect(settled.missed == 6 && settled.released.isEmpty)
        #expect(sequencer.position(of: "alpha")?.taken == 10)
        #expect(sequencer.expect("alpha", through: Self.stamp(10)) == nil, "nothing more to read")
        #expect(sequencer.expect("alpha", through: Self.stamp(1 << 40)) == nil, "an implausible head is refused")
    }

    @Test("what waits is bounded per origin: past it, the waiting messages are let go of and the log must bring everything through the newest")
    func heldBound() {
        var sequencer = Self.following(taken: 4)
        sequencer.heldLimitPerOrigin = 3
        for number in UInt64(10)...15 {
            _ = sequencer.live("m\(number)", host: "alpha", stamp: Self.stamp(number), logSequence: 11, size: 1)
        }
        #expect(sequencer.heldMessages <= 3)
        #expect(sequencer.discarded > 0)
        let applied = sequencer.apply(record: 12, of: "alpha", entries: Self.record(5...15))
        #expect(applied.take == (5...15).map { "m\($0)" }, "each once, in order: the log's, the waiting ones dropped as repeats")
        #expect(!sequencer.needsMore("alpha"))
    }

    @Test("an origin met for the first time with more live messages than may wait (a burst during catch-up) starts with the first of them, not the newest: the log brings them all, in order")
    func newOriginPastTheBound() {
        var sequencer = Sequencer()
        sequencer.heldLimitPerOrigin = 3
        sequencer.beginCatchUp()
        for number in UInt64(1)...8 {
            #expect(sequencer.live("m\(number)", host: "alpha", stamp: Self.stamp(number), logSequence: 0, size: 1) == .held(readFrom: nil))
        }
        #expect(sequencer.discarded > 0)
        let ended = sequencer.endCatchUp(through: 0)
        #expect(ended.take.isEmpty && ended.reads.map(\.host) == ["alpha"] && ended.reads.first?.from == 0)
        // Still coming while the read is under way: they wait, and the read must reach them too.
        for number in UInt64(9)...12 {
            _ = sequencer.live("m\(number)", host: "alpha", stamp: Self.stamp(number), logSequence: 0, size: 1)
        }
        var taken: [String] = []
        for (sequence, numbers) in [(1, 1...4), (2, 5...8), (3, 9...12)] as [(UInt64, ClosedRange<UInt64>)] {
            let applied = sequencer.apply(record: sequence, of: "alpha", entries: Self.record(numbers))
            #expect(applied.missed == 0)
            taken += applied.take
        }
        #expect(taken == (1...12).map { "m\($0)" }, "each once, in order, from the first live one")
        #expect(!sequencer.needsMore("alpha") && sequencer.repairs == 0)
        #expect(sequencer.live("m13", host: "alpha", stamp: Self.stamp(13), logSequence: 3, size: 1) == .take)
    }

    @Test("an origin met for the first time is read from the least log sequence its waiting messages name: a forged one can make the read start sooner, never later")
    func newOriginReadStart() {
        var sequencer = Sequencer()
        sequencer.beginCatchUp()
        _ = sequencer.live("m5", host: "alpha", stamp: Self.stamp(5), logSequence: 40, size: 1)
        // A forgery with an earlier number and a log sequence far past the real records.
        _ = sequencer.live("forged", host: "alpha", stamp: Self.stamp(2), logSequence: 1_000_000, size: 1)
        _ = sequencer.live("m6", host: "alpha", stamp: Self.stamp(6), logSequence: 41, size: 1)
        let ended = sequencer.endCatchUp(through: 30)
        #expect(ended.reads.map(\.host) == ["alpha"] && ended.reads.first?.from == 40)
    }

    @Test("too many origins: one more is taken as it comes, untracked")
    func originBound() {
        var sequencer = Sequencer()
        sequencer.originLimit = 1
        _ = sequencer.live("a", host: "alpha", stamp: Self.stamp(1), logSequence: 0, size: 1)
        #expect(sequencer.live("b", host: "beta", stamp: Self.stamp(1), logSequence: 0, size: 1) == .untracked)
    }
}

/// A record of the log: the `HPUB` operations of an outbox chunk, read back without a server.
@Suite("Log records", .timeLimit(.minutes(3)))
struct LogRecordTests {
    static func export(_ topic: String, _ text: String, number: Int) throws -> FleetExport {
        FleetExport(
            delivery: Delivery(
                topic: try Topic(topic),
                sequence: UInt64(number),
                time: PublishTime(microsecondsSinceEpoch: 5),
                publisher: Publisher(uid: 7, pid: 8),
                payload: ByteBuffer(string: text)
            ),
            kind: .retained
        )
    }

    @Test("a chunk the encoder wrote reads back as its live messages, numbered, in order; the copies for the stream of latest messages are skipped")
    func roundTrip() throws {
        var encoder = ExportEncoder(prefix: "fleet", hostName: "alpha", epoch: 42, numbers: true)
        encoder.logSequence = 9
        var chunk = ByteBuffer()
        for number in 1...3 {
            let message = try Self.export("demo.t\(number)", "payload \(number)", number: number)
            encoder.write(message, into: &chunk)
            encoder.numberUsed()
        }
        var read: [(String, String, ExportStamp?, UInt64)] = []
        #expect(LogRecord.forEachMessage(in: chunk, under: "fleet.") { message in
            let provenance = Provenance(headers: message.headers)
            read.append((message.subject, String(buffer: message.payload), provenance.export, provenance.logSequence))
        })
        #expect(read.map(\.0) == ["fleet.demo.t1", "fleet.demo.t2", "fleet.demo.t3"])
        #expect(read.map(\.1) == ["payload 1", "payload 2", "payload 3"])
        #expect(read.map(\.2) == [ExportStamp(epoch: 42, number: 1), ExportStamp(epoch: 42, number: 2), ExportStamp(epoch: 42, number: 3)])
        #expect(read.allSatisfy { $0.3 == 9 })
    }

    @Test("a record that is not well-formed HPUB operations is refused whole: sizes past the end, a missing CRLF, another operation")
    func malformed() throws {
        var encoder = ExportEncoder(prefix: "fleet", hostName: "alpha", epoch: 42, numbers: true)
        var chunk = ByteBuffer()
        encoder.write(try Self.export("demo.t", "payload", number: 1), into: &chunk)
        let whole = String(buffer: chunk)
        for bad in [
            String(whole.dropLast(3)),
            whole.replacingOccurrences(of: "HPUB", with: "PUB"),
            "HPUB fleet.x 99999999 99999999\r\n",
            "HPUB fleet.x 5 3\r\nNATS/\r\n",
            "HPUB fleet.x 12 14\r\nNATS/1.0\r\n\r\nabXX",
            whole + "garbage",
        ] {
            var called = false
            #expect(!LogRecord.forEachMessage(in: ByteBuffer(string: bad), under: "fleet.") { _ in called = true }, "\(bad.debugDescription)")
            #expect(!called)
        }
    }
}

/// Where this host stands, as its state file keeps it.
@Suite("Positions file", .timeLimit(.minutes(3)))
struct PositionFileTests {
    @Test("written and read back the same; a file that does not read says why")
    func roundTrip() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("notifyd-positions-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/positions-notifyd"
        let file = PositionFile(origins: ["alpha": OriginPosition(epoch: 5, taken: 6, logSequence: 7), "web.01": OriginPosition(epoch: 1, taken: 2, logSequence: 3)], start: 9)
        try file.write(to: path)
        #expect(try PositionFile.read(path) == file)
        #expect(try PositionFile.read(directory + "/none") == nil)
        for bad in ["nothing", "notifyd-fleet positions 1\nalpha 1 2", "notifyd-fleet positions 1\nal/pha 1 2 3", "notifyd-fleet positions 1\nalpha 1 2 99999999999999999999999"] {
            #expect(throws: PositionFileError.self) { try PositionFile(parsing: bad) }
        }
    }
}
