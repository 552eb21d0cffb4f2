import Testing

@testable import NotifyDaemon

@Suite("Giving memory back when idle", .timeLimit(.minutes(3)))
struct MemoryTrimmerTests {
    @Test("once per quiet spell: after a tick with work, the first tick without; never while work goes on")
    func oncePerQuietSpell() {
        var trimmer = MemoryTrimmer()
        var releases = 0
        trimmer.tick(work: 0) { releases += 1 }
        #expect(trimmer.trims == 0, "the first look only notes where the work stands")
        trimmer.tick(work: 0) { releases += 1 }
        #expect(trimmer.trims == 1, "a daemon that starts idle gives back what start-up freed")
        trimmer.tick(work: 0) { releases += 1 }
        #expect(trimmer.trims == 1)
        for work in [5, 9, 20] { trimmer.tick(work: work) { releases += 1 } }
        #expect(trimmer.trims == 1, "busy: nothing")
        trimmer.tick(work: 20) { releases += 1 }
        trimmer.tick(work: 20) { releases += 1 }
        #expect(trimmer.trims == 2)
        #expect(releases == 2, "what the daemon keeps to go faster is let go before each trim, and only then")
    }
}
