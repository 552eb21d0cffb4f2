import Foundation
import NotifyBus
import Testing

/// `notify subscribe --since`, through the real daemon: the history after a point, a drop notice for what it no
/// longer holds, then live messages.
@Suite("Resuming from history on a real notifyd", .timeLimit(.minutes(10)))
struct ResumeTests {
    /// The `seq` of a JSON delivery line.
    static func sequence(_ line: Substring) -> Int? {
        guard let start = line.range(of: "\"seq\":")?.upperBound else { return nil }
        return Int(line[start...].prefix { $0.isNumber })
    }

    @Test("--since SEQ prints what came after it, then live messages; what history let go of is announced first")
    func sinceSequence() async throws {
        let daemon = try await TestDaemon.start(arguments: ["--history-messages", "5"])
        let publisher = try await daemon.client()
        for index in 1...12 { _ = try await publisher.publishAcknowledged("m\(index)", to: Topic("resume.t"), retain: false) }

        let full = try await daemon.notify(["subscribe", "resume.t", "--since", "9", "--count", "3"])
        #expect(full.status == 0 && full.output == "resume.t m10\nresume.t m11\nresume.t m12\n", "\(full.stderr)")

        let gap = try await daemon.notify(["subscribe", "resume.t", "--since", "2", "--count", "5", "--format", "json"])
        let lines = gap.output.split(separator: "\n")
        #expect(lines.first == #"{"dropped":{"topic":"resume.t","count":5,"first_seq":3,"last_seq":7,"reason":"history"}}"#)
        #expect(lines.dropFirst().map(Self.sequence) == [8, 9, 10, 11, 12])

        // Resuming at the newest while a publish races the subscription: whether it comes from history or live,
        // it is the first thing printed, once.
        let live = try startNotify(["subscribe", "resume.t", "--since", "12", "--count", "1"], socket: daemon.socketPath)
        _ = try await publisher.publishAcknowledged("m13", to: Topic("resume.t"), retain: false)
        #expect(try await live.exitStatus() == 0)
        try await live.standardOutput.wait("its output to end") { _ in live.standardOutput.isClosed }
        #expect(live.standardOutput.text == "resume.t m13\n")
        await publisher.close()
        try await daemon.stop()
    }

    @Test("--since TIME prints each matching topic's messages after that time; --since SEQ wants one topic by name")
    func sinceTime() async throws {
        let daemon = try await TestDaemon.start()
        let publisher = try await daemon.client()
        _ = try await publisher.publishAcknowledged("before", to: Topic("resume.a"))
        let cut = try #require(try await publisher.latest(Topic("resume.a"))).time
        _ = try await publisher.publishAcknowledged("after-a", to: Topic("resume.a"), retain: false)
        _ = try await publisher.publishAcknowledged("after-b", to: Topic("resume.b"), retain: false)
        _ = try await publisher.publishAcknowledged("elsewhere", to: Topic("other"), retain: false)
        let result = try await daemon.notify(["subscribe", "resume.*", "--since", cut.rfc3339, "--count", "2"])
        #expect(result.status == 0)
        #expect(Set(result.output.split(separator: "\n")) == ["resume.a after-a", "resume.b after-b"])

        let refused = try await daemon.notify(["subscribe", "resume.*", "--since", "3"])
        #expect(refused.status == 64 && refused.stderr.contains("--since SEQ resumes one topic"), "\(refused.stderr)")
        await publisher.close()
        try await daemon.stop()
    }

    @Test("history (the default) survives a clean stop and a kill -9: a subscriber resumes across both with nothing lost or repeated")
    func acrossRestarts() async throws {
        let directory = try TemporaryDirectory()
        let history: [String] = []
        var daemon = try await TestDaemon.start(in: directory, arguments: history)
        var publisher = try await daemon.client()
        for index in 1...10 { _ = try await publisher.publishAcknowledged("m\(index)", to: Topic("resume.r"), retain: false) }
        await publisher.close()
        #expect(try await daemon.stop() == 0)

        daemon = try await TestDaemon.start(in: directory, arguments: history)
        publisher = try await daemon.client()
        for index in 11...20 { _ = try await publisher.publishAcknowledged("m\(index)", to: Topic("resume.r"), retain: false) }
        try await daemon.kill()

        daemon = try await TestDaemon.start(in: directory, arguments: history)
        publisher = try await daemon.client()
        let next = try await publisher.publishAcknowledged("m21", to: Topic("resume.r"), retain: false)
        #expect(next == 21, "numbers go on exactly after a kill -9, with no gap a resume would report")
        let resumed = try await daemon.notify(["subscribe", "resume.r", "--since", "5", "--count", "16"])
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(resumed.output == (6...21).map { "resume.r m\($0)\n" }.joined())
        #expect(resumed.stderr.isEmpty, "no drop announced: \(resumed.stderr)")
        await publisher.close()
        try await daemon.stop()
    }

    @Test("notify history prints the last messages of a topic, oldest first; nothing for a topic without history")
    func historyCommand() async throws {
        let daemon = try await TestDaemon.start(arguments: ["--history-messages", "4"])
        let publisher = try await daemon.client()
        for index in 1...6 { _ = try await publisher.publishAcknowledged("h\(index)", to: Topic("resume.h"), retain: false) }
        let all = try await daemon.notify(["history", "resume.h"])
        #expect(all.status == 0 && all.output == "resume.h h3\nresume.h h4\nresume.h h5\nresume.h h6\n", "\(all.stderr)")
        let last = try await daemon.notify(["history", "resume.h", "--count", "1", "--format", "raw"])
        #expect(last.output == "h6\n")
        let library = try await publisher.history(of: Topic("resume.h"), count: 2)
        #expect(library.map(\.sequence) == [5, 6])
        let none = try await daemon.notify(["history", "resume.none"])
        #expect(none.status == 0 && none.output.isEmpty)
        await publisher.close()
        try await daemon.stop()
    }
}
