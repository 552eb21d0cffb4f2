import Foundation
import Logging
import NIOCore
import NotifyBus
import Testing

@testable import NotifyDaemon

@Suite("Journal fields", .timeLimit(.minutes(3)))
struct JournalFieldsTests {
    /// The checkout this file is in (Tests/NotifydTests/ under it).
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    @Test("a record becomes MESSAGE, PRIORITY, identifier, code location, and one field per metadata key")
    func fields() {
        let fields = JournalLogHandler.fields(
            identifier: "notifyd",
            level: .notice,
            message: "refused: topic \"$x\" is reserved\nsecond line",
            metadata: [
                "topic": "$x", "peer_uid": "1000", "peer_pid": "42", "peer_unit": "backup.service", "dropped": "7",
                DaemonEvent.metadataKey: .string(DaemonEvent.publishRefused.rawValue),
            ],
            file: "notifyd/Server/NotifyServer.swift",
            function: "log(_:logger:)",
            line: 12
        )
        #expect(fields.map { "\($0.name)=\($0.value)" } == [
            "MESSAGE=refused: topic \"$x\" is reserved\nsecond line",
            "PRIORITY=5",
            "SYSLOG_IDENTIFIER=notifyd",
            "CODE_FILE=notifyd/Server/NotifyServer.swift",
            "CODE_LINE=12",
            "CODE_FUNC=log(_:logger:)",
            "DROPPED=7",
            "MESSAGE_ID=d1ac439938a34eee8a3ee6267006cb0c",
            "PEER_PID=42",
            "PEER_UID=1000",
            "PEER_UNIT=backup.service",
            "TOPIC=$x",
        ])
    }

    @Test("swift-log levels map to syslog priorities", arguments: [
        (Logger.Level.trace, 7), (.debug, 7), (.info, 6), (.notice, 5), (.warning, 4), (.error, 3), (.critical, 2),
    ])
    func priorities(_ level: Logger.Level, _ priority: Int) {
        #expect(JournalLogHandler.priority(of: level) == priority)
    }

    @Test("the stderr line is readable and leaves the message id out")
    func standardErrorLine() {
        let line = StandardErrorLogHandler.line(
            time: PublishTime(microsecondsSinceEpoch: 1_795_305_600_000_000),
            identifier: "notifyd",
            level: .info,
            message: "listening",
            metadata: ["socket": "/run/x.sock", DaemonEvent.metadataKey: "a70c2dcbd61748cb8346970c7821b0a5"]
        )
        #expect(line == "2026-11-22T00:00:00Z notifyd info: listening (socket=/run/x.sock)\n")
    }

    @Test("every kind of event has its own 128-bit message id, and the table in docs/configuration.md lists it")
    func messageIDs() throws {
        let all = DaemonEvent.allCases
        let page = try String(contentsOfFile: Self.packageRoot + "/docs/configuration.md", encoding: .utf8)
        for event in all {
            #expect(page.contains("`\(event.rawValue)`"), "docs/configuration.md lacks the MESSAGE_ID of \(event)")
        }
        #expect(Set(all.map(\.rawValue)).count == all.count)
        for event in all {
            #expect(event.rawValue.count == 32 && event.rawValue.allSatisfy(\.isHexDigit))
        }
    }
}

@Suite("Event rate limiter", .timeLimit(.minutes(3)))
struct EventRateLimiterTests {
    @Test("lets a burst through per window and reports what it held back")
    func burst() {
        var limiter = EventRateLimiter(burst: 3, window: .seconds(10))
        let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
        let first = (0..<5).map { _ in limiter.admit(.publishRefused, now: start + .seconds(1)).admitted }
        #expect(first == [true, true, true, false, false])
        #expect(limiter.admit(.messageCleared, now: start).admitted, "each kind has its own budget")
        let next = limiter.admit(.publishRefused, now: start + .seconds(12))
        #expect(next.admitted && next.suppressedBefore == 2)
        #expect(limiter.admit(.publishRefused, now: start + .seconds(13)).suppressedBefore == 0)
    }
}
