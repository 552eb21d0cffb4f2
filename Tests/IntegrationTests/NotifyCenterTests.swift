import Foundation
import NotifyBus
import NotifyCenter
import Synchronization
import Testing

/// A typed notification, as a Swift service would declare it.
private struct BackupFinished: NotifyMessage, Codable, Equatable {
    static let topic = Topic.literal("center.backup.finished")
    var host: String
    var number: Int
    var at: Date
}

/// A family of topics, one per host: the daemon buffers the latest of each.
private struct DiskUsage: NotifyMessage, Codable, Equatable {
    static let topic = Topic.literal("center.disk")
    static var topics: TopicPattern { .descendants(of: topic) }
    var topic: Topic { Self.topic.appending(host) }
    var host: String
    var percent: Int
}

/// A value compared by observers that select with `equalTo:`.
private struct Alarm: NotifyMessage, Codable, Equatable {
    static let topic = Topic.literal("center.alarm")
    var level: String
}

/// What observers were handed, and a tick for each, to wait on with a deadline.
private final class Recorder<Value: Sendable>: Sendable {
    private let values = Mutex<[Value]>([])
    private let ticks: AsyncStream<Void>
    private let tick: AsyncStream<Void>.Continuation
    /// Observers running now, and the most that ever ran at once.
    private let running = Mutex((now: 0, most: 0))

    init() {
        (ticks, tick) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    func record(_ value: Value) {
        running.withLock { $0.now += 1; $0.most = max($0.most, $0.now) }
        values.withLock { $0.append(value) }
        running.withLock { $0.now -= 1 }
        tick.yield()
    }

    var all: [Value] { values.withLock { $0 } }
    var mostAtOnce: Int { running.withLock { $0.most } }

    func wait(_ what: String, until done: @escaping @Sendable ([Value]) -> Bool) async throws {
        try await withDeadline(.seconds(60), waitingFor: what) {
            if done(self.all) { return }
            for await _ in self.ticks where done(self.all) { return }
        }
    }
}

/// Counts the observers running at once, across observers: a center calls one at a time. Each call stays a
/// little while inside, so that calls that overlapped would be seen.
private final class Overlap: Sendable {
    private let running = Mutex((now: 0, most: 0))

    func during(_ body: () -> Void) {
        running.withLock { $0.now += 1; $0.most = max($0.most, $0.now) }
        let until = ContinuousClock.now + .microseconds(50)
        while ContinuousClock.now < until {}
        body()
        running.withLock { $0.now -= 1 }
    }

    var most: Int { running.withLock { $0.most } }
}

/// The observer object of the Observer pattern, held weakly by the center.
private final class BackupWatcher: MessengerObserver, Sendable {
    let recorder: Recorder<Int>
    let overlap: Overlap
    init(_ recorder: Recorder<Int>, _ overlap: Overlap) {
        self.recorder = recorder
        self.overlap = overlap
    }
    func receive(_ message: BackupFinished) { overlap.during { recorder.record(message.number) } }
}

/// `NotifyCenter` against the real daemon: typed notifications between processes' centers and the shell.
@Suite("Typed notifications through a real notifyd", .timeLimit(.minutes(10)))
struct NotifyCenterTests {
    fileprivate static func backup(_ number: Int) -> BackupFinished {
        BackupFinished(host: "db1", number: number, at: Date(timeIntervalSince1970: TimeInterval(1_795_600_800 + number)))
    }

    @Test("two centers exchange typed notifications, latest first, across a daemon restart, with observers added and removed while they flow, one at a time, and no echo")
    func exchange() async throws {
        let directory = try TemporaryDirectory()
        var daemon = try await TestDaemon.start(in: directory)
        let poster = try await NotifyCenter.connect(to: daemon.socketPath)
        let follower = try await NotifyCenter.connect(to: daemon.socketPath)
        try await poster.post(Self.backup(1))

        // Latest first: the buffered one, then live ones.
        let overlap = Overlap()
        let followed = Recorder<Int>()
        let token = try await follower.observe(BackupFinished.self, latestFirst: true) { received in
            overlap.during { followed.record(received.value.number) }
        }
        try await followed.wait("the latest first") { $0 == [1] }
        let watched = Recorder<Int>()
        let watcher = BackupWatcher(watched, overlap)
        try await follower.add(watcher)
        let own = Recorder<Int>()
        let ownToken = try await poster.observe(BackupFinished.self) { own.record($0.value.number) }

        for number in 2...20 { try await poster.post(Self.backup(number)) }
        try await watched.wait("the observer object to have 2…20") { $0.last == 20 }
        // Changes while messages flow: the object goes, a token observer comes.
        let posting = Task { for number in 21...40 { try await poster.post(Self.backup(number)) } }
        #expect(follower.remove(watcher))
        let late = Recorder<Int>()
        let lateToken = try await follower.observe(BackupFinished.self) { received in
            overlap.during { late.record(received.value.number) }
        }
        try await posting.value
        try await followed.wait("2…40 before the restart") { $0.last == 40 }

        #expect(try await daemon.stop() == 0)
        daemon = try await TestDaemon.start(in: directory)
        // The poster connects again by itself; the follower's observers resume after what they had.
        for number in 41...60 { try await poster.post(Self.backup(number)) }
        try await followed.wait("all 60") { $0.last == 60 }
        try await late.wait("the late observer to reach 60") { $0.last == 60 }

        #expect(followed.all == Array(1...60), "each once, in order, across the restart")
        let watchedAll = watched.all
        #expect(watchedAll == Array(2...(watchedAll.last ?? 0)) && (watchedAll.last ?? 0) < 41, "removed: nothing after, \(watchedAll)")
        let lateAll = late.all
        #expect(lateAll == Array((lateAll.first ?? 0)...60) && (lateAll.first ?? 0) > 20, "from when it was added: \(lateAll)")
        #expect(overlap.most == 1, "one observer at a time, across observers")

        // No echo: the poster's observer hears another center's post, and none of its own before it.
        try await follower.post(Self.backup(1_000))
        try await own.wait("the poster to hear the follower") { $0.contains(1_000) }
        #expect(own.all == [1_000])
        let latest = try await follower.latest(BackupFinished.self)
        #expect(latest?.value == Self.backup(1_000) && latest?.publisher.pid == getpid())
        try await follower.clear(BackupFinished.self)
        #expect(try await poster.latest(BackupFinished.self) == nil)

        token.cancel()
        lateToken.cancel()
        ownToken.cancel()
        await poster.close()
        await follower.close()
        try await daemon.stop()
    }

    @Test("notify send's JSON is a typed value, a message that is not one is surfaced, and a typed post reads in notify subscribe --format json")
    func shell() async throws {
        let daemon = try await TestDaemon.start()
        let undecodable = Recorder<UndecodableNotification>()
        let center = try await NotifyCenter.connect(to: daemon.socketPath, onUndecodable: { undecodable.record($0) })
        let received = Recorder<Received<BackupFinished>>()
        let token = try await center.observe(BackupFinished.self) { received.record($0) }

        let sent = try await daemon.notify(["send", BackupFinished.topic.name, #"{"host": "sh", "number": 3, "at": "2026-11-25T10:00:00Z"}"#])
        #expect(sent.status == 0, "\(sent.stderr)")
        try await received.wait("the script's message") { $0.count == 1 }
        let fromScript = try #require(received.all.first)
        #expect(fromScript.value == BackupFinished(host: "sh", number: 3, at: Date(timeIntervalSince1970: 1_795_600_800)))
        #expect(fromScript.publisher.pid != getpid() && fromScript.publisher.uid == getuid())

        _ = try await daemon.notify(["send", BackupFinished.topic.name, "backup done"])
        try await undecodable.wait("the message that is not JSON") { $0.count == 1 }
        #expect(undecodable.all.first?.delivery.text == "backup done")
        #expect(undecodable.all.first?.expectedType == "BackupFinished")

        let sequence = try await center.post(Self.backup(4))
        let read = try await daemon.notify(["subscribe", BackupFinished.topic.name, "--since", "\(sequence - 1)", "--count", "1", "--format", "json"])
        #expect(read.status == 0, "\(read.stderr)")
        let line = try JSONSerialization.jsonObject(with: Data(read.output.utf8)) as? [String: Any]
        #expect(line?["seq"] as? Int == Int(sequence))
        let payload = try #require(line?["payload"] as? String)
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        #expect(try decoder.decode(BackupFinished.self, from: Data(payload.utf8)) == Self.backup(4))
        #expect(received.all.count == 1, "a center does not hear its own post")

        token.cancel()
        await center.close()
        try await daemon.stop()
    }

    @Test("values skips a message that does not decode, reports it as observers do, and goes on; strictValues ends with it")
    func valuesSurviveBadInput() async throws {
        let daemon = try await TestDaemon.start()
        let undecodable = Recorder<UndecodableNotification>()
        let center = try await NotifyCenter.connect(to: daemon.socketPath, onUndecodable: { undecodable.record($0) })
        let lenient = try await center.messages(of: BackupFinished.self)
        let strict = try await center.messages(of: BackupFinished.self)

        // Any local user may publish to an ordinary topic: a message of another shape, then a good one.
        #expect(try await daemon.notify(["send", BackupFinished.topic.name, "garbage"]).status == 0)
        let good = #"{"host": "sh", "number": 5, "at": "2026-11-25T10:00:00Z"}"#
        #expect(try await daemon.notify(["send", BackupFinished.topic.name, good]).status == 0)

        let first = try await withDeadline(.seconds(30), waitingFor: "the good message through values") { () -> Received<BackupFinished>? in
            var iterator = lenient.values.makeAsyncIterator()
            return try await iterator.next()
        }
        #expect(first?.value.number == 5, "the sequence went on past the message that does not decode")
        try await undecodable.wait("the report of the message that does not decode") { $0.count == 1 }
        #expect(undecodable.all.first?.delivery.text == "garbage")

        let ended = try await withDeadline(.seconds(30), waitingFor: "strictValues to end") { () -> String in
            var iterator = strict.strictValues.makeAsyncIterator()
            do {
                let value = try await iterator.next()
                return "a value: \(String(describing: value))"
            } catch let error as UndecodableNotification {
                return error.delivery.text ?? "(not text)"
            }
        }
        #expect(ended == "garbage")
        await center.close()
        try await daemon.stop()
    }

    @Test("remove(_:) stops only this center's tokens: another center's, or a Messenger's, is left running")
    func removeOwnTokensOnly() async throws {
        let daemon = try await TestDaemon.start()
        let observing = try await NotifyCenter.connect(to: daemon.socketPath)
        let other = try await NotifyCenter.connect(to: daemon.socketPath)
        let heard = Recorder<Int>()
        let token = try await observing.observe(BackupFinished.self) { heard.record($0.value.number) }
        let messenger = Messenger<Int>()
        let messengerToken = messenger.observe { _ in }

        #expect(!other.remove(token), "not the other center's")
        #expect(!observing.remove(messengerToken), "not a center's at all")
        #expect(!messengerToken.isCancelled && messenger.observerCount == 1)
        try await other.post(Self.backup(1))
        try await heard.wait("the observation to go on") { $0 == [1] }

        #expect(observing.remove(token))
        #expect(token.isCancelled && observing.observerCount == 0)
        await observing.close()
        await other.close()
        try await daemon.stop()
    }

    @Test("a center made over a client follows its echo: one that does not echo leaves its own posts out also of a history replay")
    func centerFollowsClientEcho() async throws {
        let daemon = try await TestDaemon.start()
        let quiet = try await NotifyClient.connect(to: daemon.socketPath)
        try await quiet.setEcho(false)
        let center = NotifyCenter(client: quiet)
        try await center.post(Self.backup(1))
        // The history holds its own post, which the daemon replays like any other: only the center can leave it out.
        let notifications = try await center.messages(of: BackupFinished.self, since: .sequence(0))
        let other = try await NotifyCenter.connect(to: daemon.socketPath)
        try await other.post(Self.backup(2))
        var heard: [Int] = []
        for try await received in notifications.values {
            heard.append(received.value.number)
            if received.value.number == 2 { break }
        }
        #expect(heard == [2], "its own post is not heard")
        await other.close()
        await center.close()
        try await daemon.stop()
    }

    @Test("a center over a client follows its echo as it changes: told setEcho(false) after the center was made, it leaves its own posts out of a history replay")
    func centerFollowsLaterEcho() async throws {
        let daemon = try await TestDaemon.start()
        let client = try await NotifyClient.connect(to: daemon.socketPath)
        let center = NotifyCenter(client: client)
        try await client.setEcho(false)
        try await center.post(Self.backup(1))
        let notifications = try await center.messages(of: BackupFinished.self, since: .sequence(0))
        let other = try await NotifyCenter.connect(to: daemon.socketPath)
        try await other.post(Self.backup(2))
        let heard = try await withDeadline(.seconds(30), waitingFor: "the other center's post") { () -> [Int] in
            var heard: [Int] = []
            for try await received in notifications.values {
                heard.append(received.value.number)
                if received.value.number == 2 { break }
            }
            return heard
        }
        #expect(heard == [2], "its own post is not heard, though the client echoed when the center was made")
        await other.close()
        await center.close()
        try await daemon.stop()
    }

    @Test("remove(token) says whether the observation still ran: false for one that ended by itself; a token let go of ends its observation")
    func removeAfterEnd() async throws {
        let daemon = try await TestDaemon.start()
        let ended = Recorder<String>()
        let center = try await NotifyCenter.connect(to: daemon.socketPath, reconnectWithin: nil, onEnded: { ended.record("\($0)") })
        let heard = Recorder<Int>()
        // A token nobody keeps: the observation ends with it.
        _ = try await center.observe(BackupFinished.self) { heard.record($0.value.number) }
        #expect(center.observerCount == 0, "ended when its token was let go of")
        let running = try await center.observe(Alarm.self) { _ in }
        #expect(center.observerCount == 1)
        let poster = try await NotifyCenter.connect(to: daemon.socketPath)
        try await poster.post(Self.backup(1))
        try await poster.post(Alarm(level: "x"))
        await poster.close()

        #expect(try await daemon.stop() == 0)
        try await ended.wait("the observation to end by itself") { !$0.isEmpty }
        #expect(!center.remove(running), "it had ended: nothing to remove")
        #expect(!center.remove(running), "nor the second time")
        #expect(heard.all.isEmpty, "the observation whose token was let go of heard nothing")
        await center.close()
    }

    @Test("an observation whose subscription ends by itself is reported, not dropped; one removed on purpose is not")
    func endedObservation() async throws {
        let daemon = try await TestDaemon.start()
        let ended = Recorder<String>()
        let center = try await NotifyCenter.connect(to: daemon.socketPath, reconnectWithin: nil, onEnded: { ended.record("\($0)") })
        let kept = try await center.observe(Alarm.self) { _ in }
        let removed = try await center.observe(BackupFinished.self) { _ in }
        removed.cancel()
        #expect(try await daemon.stop() == 0)
        try await ended.wait("the observation of Alarm to be reported ended") { !$0.isEmpty }
        #expect(ended.all.count == 1 && ended.all[0].contains("Alarm") && ended.all[0].contains("center.alarm"), "\(ended.all)")
        #expect(center.observerCount == 0)
        kept.cancel()
        await center.close()
    }

    @Test("a family of topics keeps the latest of each; observers select by predicate, value and sender; one on the main actor runs there; an observer object that dies is dropped")
    func selection() async throws {
        let daemon = try await TestDaemon.start()
        let poster = try await NotifyCenter.connect(to: daemon.socketPath)
        let follower = try await NotifyCenter.connect(to: daemon.socketPath)

        // One topic per host, the latest of each buffered; a host name with dots is one token.
        try await poster.post(DiskUsage(host: "db1.example.org", percent: 10))
        try await poster.post(DiskUsage(host: "db2", percent: 20))
        try await poster.post(DiskUsage(host: "db1.example.org", percent: 11))
        let db1 = try await follower.latest(DiskUsage.self, topic: DiskUsage.topic.appending("db1.example.org"))
        #expect(db1?.value == DiskUsage(host: "db1.example.org", percent: 11))
        #expect(db1?.topic.name == "center.disk.db1_example_org")
        let latestOfEach = try await withDeadline(.seconds(30), waitingFor: "the latest of both hosts") {
            var latestOfEach: [String: Int] = [:]
            for try await event in try await follower.messages(of: DiskUsage.self, latestFirst: true) {
                guard case .notification(let usage) = event else { continue }
                latestOfEach[usage.value.host] = usage.value.percent
                if latestOfEach.count == 2 { break }
            }
            return latestOfEach
        }
        #expect(latestOfEach == ["db1.example.org": 11, "db2": 20])

        // By predicate, by value, by sender, on the main actor.
        let high = Recorder<Int>()
        let highToken = try await follower.observe(DiskUsage.self, where: { $0.percent > 50 }) { high.record($0.value.percent) }
        let critical = Recorder<String>()
        let criticalToken = try await follower.observe(Alarm.self, equalTo: Alarm(level: "critical")) { critical.record($0.value.level) }
        let fromPoster = Recorder<String>()
        let posterToken = try await follower.observe(Alarm.self, from: Sender(uid: getuid(), pid: getpid())) { fromPoster.record($0.value.level) }
        let all = Recorder<String>()
        let allToken = try await follower.observe(Alarm.self) { all.record($0.value.level) }
        let onMain = Recorder<Int>()
        let mainToken = try await follower.observeOnMainActor(DiskUsage.self) { usage in
            MainActor.assertIsolated()
            onMain.record(usage.value.percent)
        }

        for percent in [40, 60, 90] { try await poster.post(DiskUsage(host: "db3", percent: percent)) }
        let shell = try await daemon.notify(["send", Alarm.topic.name, #"{"level":"critical"}"#])
        #expect(shell.status == 0, "\(shell.stderr)")
        for level in ["info", "critical", "info"] { try await poster.post(Alarm(level: level)) }
        try await high.wait("the two over 50") { $0.count == 2 }
        try await all.wait("all four alarms") { $0.count == 4 }
        try await onMain.wait("the main-actor observer") { $0.count == 3 }
        #expect(high.all == [60, 90])
        #expect(onMain.all == [40, 60, 90])
        try await critical.wait("the two critical alarms") { $0.count == 2 }
        try await fromPoster.wait("the poster's three alarms") { $0.count == 3 }
        #expect(critical.all == ["critical", "critical"])
        #expect(all.all == ["critical", "info", "critical", "info"])
        #expect(fromPoster.all == ["info", "critical", "info"], "the shell's alarm came first and is not the poster's")

        // One order across observers of different types: the order the daemon's deliveries reach the connection.
        let both = Recorder<String>()
        let alarmToken = try await follower.observe(Alarm.self) { both.record("alarm \($0.value.level)") }
        let usageToken = try await follower.observe(DiskUsage.self) { both.record("usage \($0.value.percent)") }
        var expected: [String] = []
        // Sent without waiting for each acknowledgement, so that they reach the follower together.
        for round in 1...20 {
            try await poster.send(Alarm(level: "l\(round)"))
            try await poster.send(DiskUsage(host: "db5", percent: round))
            expected += ["alarm l\(round)", "usage \(round)"]
        }
        try await poster.client.flush()
        try await both.wait("40 notifications of two types") { $0.count == 40 }
        #expect(both.all == expected)
        alarmToken.cancel()
        usageToken.cancel()

        // An observer object held weakly: once it is gone, its observation ends (at the latest when the center is
        // asked for its observers).
        let before = follower.observerCount
        let watched = Recorder<Int>()
        let deaths = Recorder<Bool>()
        var watcher: UsageWatcher? = UsageWatcher(watched, deaths: deaths)
        try await follower.add(watcher!)
        #expect(follower.observerCount == before + 1)
        try await poster.post(DiskUsage(host: "db4", percent: 1))
        try await watched.wait("the observer object") { $0 == [1] }
        watcher = nil
        // The center held it only weakly: it goes once the delivery under way (if any) lets go of it.
        try await deaths.wait("the observer object to be deallocated") { $0.count == 1 }
        #expect(follower.observerCount == before)
        try await poster.post(DiskUsage(host: "db4", percent: 2))
        try await onMain.wait("the next usage") { $0.last == 2 }
        #expect(watched.all == [1])
        _ = watcher

        for token in [highToken, criticalToken, posterToken, allToken, mainToken] { token.cancel() }
        await poster.close()
        await follower.close()
        try await daemon.stop()
    }
}

/// An observer object of disk usage, held weakly by the center.
private final class UsageWatcher: MessengerObserver, Sendable {
    let recorder: Recorder<Int>
    let deaths: Recorder<Bool>
    init(_ recorder: Recorder<Int>, deaths: Recorder<Bool>) {
        self.recorder = recorder
        self.deaths = deaths
    }
    func receive(_ message: DiskUsage) { recorder.record(message.percent) }
    deinit { deaths.record(true) }
}
