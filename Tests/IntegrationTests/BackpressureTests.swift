import Foundation
import NIOCore
import NotifyBus
import Testing

/// A subscriber slower than its publishers, end to end: the client holds a bounded amount, the daemon's queue and
/// overflow policy take the rest, and what is dropped is announced in its place. Real `notifyd`, real `notify`.
@Suite("Backpressure from the consumer to the daemon", .serialized, .timeLimit(.minutes(10)))
struct BackpressureTests {
    /// Small daemon queues, so that a stalled subscriber reaches them quickly.
    static let smallQueues = ["--max-queued-bytes", "1048576", "--max-queued-messages", "1000"]
    /// Queues a stalled subscriber still overflows, with room for twice ``healthyWindow`` messages.
    static let queuesWithSlack = ["--max-queued-bytes", "4194304", "--max-queued-messages", "20000"]
    /// The most messages published that a healthy subscriber has not read yet: half the messages
    /// ``queuesWithSlack`` lets wait for it, some 550 KB of frames, a quarter of its 2 MiB write buffer.
    static let healthyWindow = 10_000
    static let messageCount = 1_000_000

    /// What a subscriber saw, in order: messages by sequence number, and drop notices by range.
    enum Seen: Equatable {
        case message(UInt64)
        case dropped(count: UInt64, first: UInt64, last: UInt64)
    }

    /// Checks that `seen`, messages and announced drops together, is exactly 1…`count` in order: every number once,
    /// each notice in the place of what it dropped. Returns how many were announced as dropped.
    static func expectWholeSequence(_ seen: [Seen], count: UInt64, _ who: String) -> UInt64 {
        var next: UInt64 = 1
        var dropped: UInt64 = 0
        for item in seen {
            switch item {
            case .message(let sequence):
                guard sequence == next else {
                    Issue.record("\(who): message \(sequence) came where \(next) was due")
                    return dropped
                }
                next += 1
            case .dropped(let n, let first, let last):
                guard first == next, last >= first, n == last - first + 1 else {
                    Issue.record("\(who): DROP \(n) \(first)-\(last) came where \(next) was due")
                    return dropped
                }
                dropped += n
                next = last + 1
            }
        }
        #expect(next == count + 1, "\(who): everything up to \(count) was delivered or announced; the last was \(next - 1)")
        return dropped
    }

    /// A process's resident memory now and at its peak, in KiB, from /proc.
    static func memory(of pid: pid_t) -> (rss: Int, peak: Int)? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        func field(_ name: String) -> Int? {
            guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") }) else { return nil }
            return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
        }
        guard let rss = field("VmRSS"), let peak = field("VmHWM") else { return nil }
        return (rss, peak)
    }

    /// Waits until the daemon holds `count` subscriptions.
    static func waitForSubscriptions(_ count: UInt64, on client: NotifyClient) async throws {
        try await withDeadline(.seconds(30), waitingFor: "\(count) subscriptions") {
            while try await client.stats()["subscriptions"] ?? 0 < count {
                try await Task.sleep(for: .milliseconds(10))
            }
        }
    }

    @Test("a stalled notify subscribe holds a few MiB, gets DROP notices in place, and misses nothing unannounced")
    func stalledCommandLineSubscriber() async throws {
        let daemon = try await TestDaemon.start(arguments: Self.queuesWithSlack)
        let fifo = daemon.directory.path + "/stalled"
        #expect(mkfifo(fifo, 0o600) == 0)
        // Open for reading and writing, as `exec 3<>fifo` does: the subscriber's open does not wait, and its output
        // never ends; nobody reads it until the test says so.
        let reader = open(fifo, O_RDWR | O_CLOEXEC)
        #expect(reader >= 0)
        defer { close(reader) }
        let stalled = try startNotifyInShell("exec \"$0\" subscribe 'load.>' --format json >\(fifo)", socket: daemon.socketPath)

        // The healthy subscriber keeps reading, and the publisher is held within a window of it (``healthyWindow``,
        // far less than what its queues take): it misses nothing whatever the machine's load, which is what the daemon
        // promises a subscriber that keeps up, while the stalled one overflows. Raw bytes, looked at afterwards.
        let healthy = try RawSocket(path: daemon.socketPath)
        try healthy.send("SUB load.>\n")
        let control = try await daemon.client()
        try await Self.waitForSubscriptions(2, on: control)

        for first in stride(from: 1, through: Self.messageCount, by: Self.healthyWindow) {
            let last = min(first + Self.healthyWindow - 1, Self.messageCount)
            try await control.publish((first...last).map { ByteBuffer(string: String($0)) }, to: Topic("load.x"), retain: false)
            try await control.flush()
            let marker = Array("MSG load.x \(last) ".utf8)
            let caughtUp = await healthy.read(timeout: .seconds(60)) { $0.suffix(256).firstRange(of: marker) != nil }
            try #require(caughtUp, "the healthy subscriber read up to message \(last)")
        }
        try await control.publishAcknowledged("end", to: Topic("load.end"))

        let memory = Self.memory(of: stalled.pid)
        #expect(memory != nil, "notify subscribe is still running")
        if let memory {
            #expect(memory.peak < 32 * 1024, "the stalled notify's peak RSS is \(memory.peak) KiB")
        }
        let stats = try await control.stats()
        #expect(stats["dropped"] ?? 0 > 0, "the daemon dropped for the stalled subscriber: \(stats)")

        let endMarker = Array("MSG load.end ".utf8)
        #expect(await healthy.read(timeout: .seconds(60)) { $0.suffix(256).firstRange(of: endMarker) != nil }, "the healthy subscriber got load.end")
        var healthySeen: [Seen] = []
        for line in healthy.received.split(separator: UInt8(ascii: "\n")) where line.starts(with: Array("MSG load.x ".utf8)) {
            let fields = line.split(separator: UInt8(ascii: " "))
            healthySeen.append(.message(UInt64(String(decoding: fields[2], as: UTF8.self)) ?? 0))
        }
        #expect(healthy.received.firstRange(of: Array("DROP ".utf8)) == nil, "nothing was dropped for the healthy subscriber")
        #expect(Self.expectWholeSequence(healthySeen, count: UInt64(Self.messageCount), "the healthy subscriber") == 0)

        // The reader resumes: everything the stalled subscriber prints, up to the end marker.
        let output = try await withDeadline(.seconds(120), waitingFor: "the stalled subscriber's output up to load.end") {
            try await onOwnThread { () -> [UInt8] in
                var bytes: [UInt8] = []
                var chunk = [UInt8](repeating: 0, count: 1 << 16)
                let marker = Array("\"topic\":\"load.end\"".utf8)
                while true {
                    let count = read(reader, &chunk, chunk.count)
                    guard count > 0 else { throw TestFailure("the fifo ended: \(errno)") }
                    bytes += chunk[0..<count]
                    if bytes.suffix(4096).split(separator: UInt8(ascii: "\n")).contains(where: { $0.starts(with: Array("{".utf8)) && $0.firstRange(of: marker) != nil }) {
                        return bytes
                    }
                }
            }
        }
        stalled.signal(SIGTERM)
        _ = try await stalled.exitStatus()

        var seen: [Seen] = []
        for line in output.split(separator: UInt8(ascii: "\n")) {
            let object = try JSONSerialization.jsonObject(with: Data(line)) as? [String: Any]
            if let dropped = object?["dropped"] as? [String: Any] {
                #expect(dropped["topic"] as? String == "load.x")
                seen.append(.dropped(
                    count: (dropped["count"] as? NSNumber)?.uint64Value ?? 0,
                    first: (dropped["first_seq"] as? NSNumber)?.uint64Value ?? 0,
                    last: (dropped["last_seq"] as? NSNumber)?.uint64Value ?? 0
                ))
            } else if object?["topic"] as? String == "load.x", let sequence = (object?["seq"] as? NSNumber)?.uint64Value {
                seen.append(.message(sequence))
            }
        }
        let dropped = Self.expectWholeSequence(seen, count: UInt64(Self.messageCount), "the stalled subscriber")
        #expect(dropped > 0, "the stalled subscriber was told of drops")
        try await daemon.stop()
    }

    @Test("a library consumer taking one event per millisecond stays within its buffer, sees DROPs, and gets replies")
    func slowLibraryConsumer() async throws {
        let daemon = try await TestDaemon.start(arguments: Self.smallQueues)
        let client = try await daemon.client()
        let limits = SubscriptionBufferLimits.default
        let subscription = try await client.subscribe(to: [TopicPattern("load.>")], overflow: .dropOldest, buffer: limits)
        try await Self.waitForSubscriptions(1, on: client)

        let lines = (1...Self.messageCount).map(String.init).joined(separator: "\n") + "\n"
        let publisher = Task {
            let sent = try await daemon.notify(["send", "load.x", "--lines", "--no-retain"], input: Array(lines.utf8), timeout: .seconds(300))
            #expect(sent.status == 0, "\(sent.stderr)")
            #expect(try await daemon.notify(["send", "load.end", "end"]).status == 0)
        }

        let (seen, mostHeld, askedWhileFull) = try await withDeadline(.seconds(300), waitingFor: "the slow consumer to reach load.end") {
            var seen: [Seen] = []
            var mostHeld = (events: 0, bytes: 0)
            var askedWhileFull = false
            for try await event in subscription {
                let held = subscription.buffered
                mostHeld = (max(mostHeld.events, held.events), max(mostHeld.bytes, held.bytes))
                switch event {
                case .message(let delivery):
                    if delivery.topic.name == "load.end" { return (seen, mostHeld, askedWhileFull) }
                    seen.append(.message(delivery.sequence))
                case .dropped(let notice):
                    seen.append(.dropped(count: notice.count, first: notice.firstSequence, last: notice.lastSequence))
                }
                if !askedWhileFull && held.events >= limits.highEvents {
                    // The subscription is held back now: replies on the same connection still come, at once.
                    askedWhileFull = true
                    let stats = try await withDeadline(.seconds(10), waitingFor: "STATS while the subscription is full") {
                        try await client.stats()
                    }
                    #expect(stats["subscriptions"] == 1)
                    let sequence = try await withDeadline(.seconds(10), waitingFor: "a publish's acknowledgement while full") {
                        try await client.publishAcknowledged("asked", to: Topic("other.topic"))
                    }
                    #expect(sequence == 1)
                    #expect(try await client.latest(Topic("other.topic"))?.text == "asked")
                }
                try await Task.sleep(for: .milliseconds(1))  // the consumer's pace, not a synchronisation
            }
            throw TestFailure("the subscription ended before load.end")
        }
        try await publisher.value
        #expect(askedWhileFull, "the consumer fell behind far enough to ask while held back")
        // Twice the marks, plus what the read that reached them brought: 64 KiB of frames of 40 bytes or more.
        let oneRead = 65_536 / 40
        #expect(mostHeld.events <= 2 * limits.highEvents + oneRead, "the subscription held at most its hard limit: \(mostHeld)")
        #expect(mostHeld.bytes <= 2 * limits.highBytes + oneRead * 128, "the subscription held at most its hard limit: \(mostHeld)")
        let dropped = Self.expectWholeSequence(seen, count: UInt64(Self.messageCount), "the slow consumer")
        #expect(dropped > 0, "the daemon dropped for the slow consumer, and said so")
        await client.close()
        try await daemon.stop()
    }

    @Test("a subscriber that reads nothing while messages come one per batch gets them all, in order, once it reads")
    func oneAtATimeToAStalledReader() async throws {
        // Each acknowledged publish is a batch of its own: while the reader's socket is full, the daemon gathers what
        // it writes to it (WriteCoalescer) instead of handing NIO a write per message, and must lose none of it.
        let daemon = try await TestDaemon.start()
        let reader = try RawSocket(path: daemon.socketPath)
        try reader.send("SUB one\n")
        let client = try await daemon.client()
        try await Self.waitForSubscriptions(1, on: client)
        let count = 3_000
        let payload = String(repeating: "x", count: 1_000)
        for _ in 1...count { _ = try await client.publishAcknowledged(payload, to: try Topic("one"), retain: false) }
        let stats = try await client.stats()
        #expect(stats["queued_bytes"] ?? 0 > 0, "the reader was behind: \(stats)")
        #expect(stats["dropped"] == 0)

        let last = Array("MSG one \(count) ".utf8)
        #expect(await reader.read(timeout: .seconds(60)) { $0.suffix(2_048).firstRange(of: last) != nil }, "everything came")
        var seen: [Seen] = []
        for line in reader.received.split(separator: UInt8(ascii: "\n")) where line.starts(with: Array("MSG one ".utf8)) {
            seen.append(.message(UInt64(String(decoding: line.split(separator: UInt8(ascii: " "))[2], as: UTF8.self)) ?? 0))
        }
        #expect(Self.expectWholeSequence(seen, count: UInt64(count), "the reader") == 0)
        try await daemon.stop()
    }
}
