import Foundation
import NIOCore
import Testing

@testable import NotifyBus
@testable import NotifyHTTP

/// What the gateway reads from a request: ids, `since=`, the topics of a stream (no socket).
@Suite("The HTTP gateway's requests (no socket)", .timeLimit(.minutes(1)))
struct RequestParsingTests {
    @Test("a message id reads back as written, at the largest numbers too; anything else is no id")
    func messageID() {
        for (time, sequence) in [(UInt64(1), UInt64(1)), (1_795_305_600_123_456, 42), (.max, .max), (0, 0)] {
            let id = MessageID(time: PublishTime(microsecondsSinceEpoch: time), sequence: sequence)
            #expect(MessageID(id.description[...]) == id)
        }
        for text in ["", "-", "abc", "1-", "-1", "1-2-3", "zzzzzzzzzzzzzz-1", "1-zzzzzzzzzzzzzz", "3w5e11264sgsg-1", "1 -2"] {
            #expect(MessageID(text[...]) == nil, "\(text)")
        }
    }

    @Test("since= takes ntfy's forms: none, all, latest, a duration back from now, a Unix time, a message id; anything else is a 400")
    func since() throws {
        let now = PublishTime(microsecondsSinceEpoch: 1_800_000_000_000_000)
        #expect(try Since(parsing: "", now: now) == .none)
        #expect(try Since(parsing: "none", now: now) == .none)
        #expect(try Since(parsing: "all", now: now) == .all)
        #expect(try Since(parsing: "latest", now: now) == .latest)
        #expect(try Since(parsing: "10m", now: now) == .time(PublishTime(microsecondsSinceEpoch: 1_800_000_000_000_000 - 600_000_000)))
        #expect(try Since(parsing: "2h", now: now) == .time(PublishTime(microsecondsSinceEpoch: 1_800_000_000_000_000 - 7_200_000_000)))
        #expect(try Since(parsing: "1d", now: now) == .time(PublishTime(microsecondsSinceEpoch: 1_800_000_000_000_000 - 86_400_000_000)))
        #expect(try Since(parsing: "1643935928", now: now) == .time(PublishTime(microsecondsSinceEpoch: 1_643_935_928_000_000)))
        // Longer ago than the epoch: from the start.
        #expect(try Since(parsing: "36000d", now: now) == .time(PublishTime(microsecondsSinceEpoch: 0)))
        let id = MessageID(time: now, sequence: 7)
        #expect(try Since(parsing: id.description[...], now: now) == .message(id))
        for bad in ["yesterday", "10x", "-5m", "99999999999999999999", "9999999999999999s", "1.5h"] {
            #expect(throws: GatewayError.self, "\(bad)") { try Since(parsing: bad[...], now: now) }
        }
    }

    @Test("a message id resumes one topic by its number, patterns from its time (repeats, never gaps); a time from the instant on")
    func resumePoints() throws {
        let id = MessageID(time: PublishTime(microsecondsSinceEpoch: 5_000), sequence: 9)
        #expect(Since.message(id).resumePoint(for: [try TopicPattern("a.b")]) == .sequence(9))
        #expect(Since.message(id).resumePoint(for: [try TopicPattern("a.*")]) == .time(PublishTime(microsecondsSinceEpoch: 4_999)))
        #expect(Since.message(id).resumePoint(for: [try TopicPattern("a"), try TopicPattern("b")]) == .time(PublishTime(microsecondsSinceEpoch: 4_999)))
        #expect(Since.time(PublishTime(microsecondsSinceEpoch: 5_000)).resumePoint(for: []) == .time(PublishTime(microsecondsSinceEpoch: 4_999)))
        #expect(Since.all.resumePoint(for: []) == .time(PublishTime(microsecondsSinceEpoch: 0)))
        #expect(Since.none.resumePoint(for: []) == nil && Since.latest.resumePoint(for: []) == nil)
    }

    @Test("a stream's path names topics and patterns, comma-separated and percent-decoded, each once; a bad one or too many is a 400")
    func topicList() throws {
        #expect(try TopicList.patterns("backup.status,jobs.%2A,sys.%3E") == [
            try TopicPattern("backup.status"), try TopicPattern("jobs.*"), try TopicPattern("sys.>"),
        ])
        #expect(try TopicList.patterns("a,a") == [try TopicPattern("a")])
        #expect(throws: GatewayError.self) { try TopicList.patterns("a,,b") }
        #expect(throws: GatewayError.self) { try TopicList.patterns("bad%") }
        #expect(throws: GatewayError.self) { try TopicList.patterns("a b") }
        let many = (0...TopicList.mostPatterns).map { "t\($0)" }.joined(separator: ",")
        #expect(throws: GatewayError.self) { try TopicList.patterns(many[...]) }
        #expect(try TopicList.topic("backup.status") == (try Topic("backup.status")))
        #expect(throws: GatewayError.self) { try TopicList.topic("jobs.%2A") }
    }
}
