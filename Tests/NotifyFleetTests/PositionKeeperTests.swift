import Foundation
import NotifyProtocol
import Testing

@testable import NotifyFleet

/// Where this host stands in the fleet's log, what reaches the state file and when, without a server: files in a
/// temporary directory.
@Suite("Position keeper: confirmed positions, the state file, the first join", .timeLimit(.minutes(1)))
struct PositionKeeperTests {
    /// A temporary state directory, removed when let go of.
    final class Directory {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("notifyd-positions-\(UUID().uuidString)").path
        init() { try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false) }
        deinit { try? FileManager.default.removeItem(atPath: path) }
    }

    static let alpha = OriginPosition(epoch: 7, taken: 40, logSequence: 120)

    @Test("a first join starts at each origin's head; once joined, or with a file, an origin met later is read from its start")
    func firstJoin() throws {
        let directory = Directory()
        var keeper = PositionKeeper(stateDirectory: directory.path)
        try keeper.load(prefix: "fleet")
        #expect(keeper.isFirstJoin && keeper.start == nil)
        #expect(keeper.firstPosition(at: ExportStamp(epoch: 9, number: 55)) == OriginPosition(epoch: 9, taken: 55, logSequence: 0))
        keeper.joined()
        keeper.start = 300
        #expect(keeper.firstPosition(at: ExportStamp(epoch: 9, number: 55)) == OriginPosition(epoch: 9, taken: 0, logSequence: 300))

        try PositionFile(origins: ["alpha": Self.alpha], start: 120).write(to: directory.path + "/positions-other")
        try keeper.load(prefix: "other")
        #expect(!keeper.isFirstJoin && keeper.start == 120 && keeper.confirmed.origins == ["alpha": Self.alpha])
        #expect(keeper.firstPosition(at: ExportStamp(epoch: 9, number: 55)).taken == 0)
    }

    @Test("only what the daemon confirmed is written, once per change, to the file of the prefix loaded")
    func writes() throws {
        let directory = Directory()
        var keeper = PositionKeeper(stateDirectory: directory.path)
        try keeper.load(prefix: "fleet")
        #expect(keeper.path == directory.path + "/positions-fleet")
        #expect(keeper.mayScheduleWrite)
        #expect(try keeper.write(), "a first join writes the empty positions, so that a restart is no first join")
        #expect(try !keeper.write(), "nothing changed")
        keeper.start = 12
        let snapshot = keeper.snapshot(of: ["alpha": Self.alpha])
        #expect(try !keeper.write(), "taken, not yet confirmed")
        keeper.confirm(snapshot)
        #expect(try keeper.write())
        #expect(try PositionFile.read(keeper.path!) == PositionFile(origins: ["alpha": Self.alpha], start: 12))
        #expect(try !keeper.write())
        keeper.writeIsScheduled = true
        #expect(!keeper.mayScheduleWrite, "one write waits at a time")
    }

    @Test("without a state directory nothing is written; a lost link falls back to what was confirmed")
    func inMemory() throws {
        var keeper = PositionKeeper(stateDirectory: nil)
        try keeper.load(prefix: "fleet")
        #expect(keeper.path == nil && !keeper.mayScheduleWrite)
        keeper.start = 5
        keeper.confirm(keeper.snapshot(of: ["alpha": Self.alpha]))
        #expect(try !keeper.write())
        keeper.start = 90
        #expect(keeper.fallBack() == ["alpha": Self.alpha])
        #expect(keeper.start == 5)
    }

    @Test("a file that does not read is said, and this host starts afresh: a first join, nothing confirmed, rewritten by the next write")
    func unreadable() throws {
        let directory = Directory()
        try "not positions\n".write(toFile: directory.path + "/positions-fleet", atomically: true, encoding: .utf8)
        var keeper = PositionKeeper(stateDirectory: directory.path)
        #expect(throws: PositionFileError.self) { try keeper.load(prefix: "fleet") }
        #expect(keeper.isFirstJoin && keeper.start == nil && keeper.confirmed == PositionFile())
        #expect(try keeper.write())
        #expect(try PositionFile.read(keeper.path!) == PositionFile())
    }
}
