import Testing

@testable import NotifyDaemon

/// Issue 14, "Identity": a connection's unit is its peer's, never that of a process that took the peer's pid.
@Suite("Unit lookup", .timeLimit(.minutes(3)))
struct UnitLookupTests {
    /// A lookup that records the pids it was asked about.
    final class Lookups {
        var asked: [Int32] = []
        func unit(_ pid: Int32) -> String? {
            asked.append(pid)
            return "other.service"
        }
    }

    @Test("a pid of 0 (a peer in a PID namespace the daemon cannot see) is never looked up")
    func pidZero() {
        let lookups = Lookups()
        let unit = UnitLookup.checkedUnit(pid: 0, uid: 1000, hasPidfd: true, lookup: lookups.unit, peerHasExited: { false }, ownerOf: { _ in 1000 })
        #expect(unit == nil && lookups.asked.isEmpty)
        #expect(UnitLookup.unit(of: 0) == nil && UnitLookup.unit(of: -1) == nil)
    }

    @Test("with a pidfd, the unit counts only if the peer still ran after the lookup")
    func pidfd() {
        let lookups = Lookups()
        #expect(UnitLookup.checkedUnit(pid: 42, uid: 1000, hasPidfd: true, lookup: lookups.unit, peerHasExited: { false }, ownerOf: { _ in nil })
            == "other.service")
        #expect(UnitLookup.checkedUnit(pid: 42, uid: 1000, hasPidfd: true, lookup: lookups.unit, peerHasExited: { true }, ownerOf: { _ in 1000 })
            == nil, "the peer is gone: its pid may be another process's now")
    }

    @Test("without a pidfd, the unit counts only if the process at the pid runs as the peer's uid")
    func noPidfd() {
        let lookups = Lookups()
        #expect(UnitLookup.checkedUnit(pid: 42, uid: 1000, hasPidfd: false, lookup: lookups.unit, peerHasExited: { true }, ownerOf: { _ in 1000 })
            == "other.service")
        #expect(UnitLookup.checkedUnit(pid: 42, uid: 1000, hasPidfd: false, lookup: lookups.unit, peerHasExited: { true }, ownerOf: { _ in 0 })
            == nil, "a process of another uid has the pid now")
    }
}
