import Foundation
import NotifyBus
import Synchronization
import Testing

/// What survives `kill -9` of a daemon that is busy: the promise behind an acknowledged publish.
@Suite("Crashes of a real notifyd", .timeLimit(.minutes(10)))
struct CrashTests {
    /// What one publisher knows about a topic when the daemon dies under it.
    struct TopicRecord: Sendable {
        var lastAcknowledged: (text: String, sequence: UInt64)?
        /// The highest sequence number acknowledged, retained or not.
        var highestSequence: UInt64 = 0
    }

    /// What one publisher saw: per topic, and the publish it had sent when the connection died, if any.
    struct PublisherRecord: Sendable {
        var topics: [String: TopicRecord] = [:]
        var inFlight: (topic: String, text: String)?
    }

    /// Publishes acknowledged messages, one at a time, round-robin over `topics`, until the connection dies; every
    /// fifth one is not retained, so sequence numbers move past what the state log holds for buffered messages.
    static func publishUntilTheDaemonDies(_ client: NotifyClient, name: String, topics: [String], progress: AsyncStream<Void>.Continuation) async -> PublisherRecord {
        var record = PublisherRecord()
        var count = 0
        while true {
            count += 1
            let topic = topics[count % topics.count]
            let text = "\(name) #\(count)"
            let retain = count % 5 != 0
            record.inFlight = (topic, text)
            do {
                let sequence = try await client.publishAcknowledged(text, to: Topic(topic), retain: retain)
                record.inFlight = nil
                record.topics[topic, default: TopicRecord()].highestSequence = sequence
                if retain { record.topics[topic, default: TopicRecord()].lastAcknowledged = (text, sequence) }
                progress.yield()
            } catch {
                return record
            }
        }
    }

    /// Under `sync = always` the acknowledgements wait for the sync thread, and a connection whose `OK` waits is not
    /// read meanwhile: the same load must go on (no connection left unread) and keep the same promise.
    @Test("kill -9 under load: every topic's latest is its last acknowledged publish, and sequence numbers continue", arguments: ["never", "always"])
    func killUnderLoad(sync: String) async throws {
        let directory = try TemporaryDirectory()
        let daemon = try await TestDaemon.start(in: directory, arguments: ["--sync", sync])
        let publishers = 8
        let topicsEach = 40
        let (progress, tick) = AsyncStream.makeStream(of: Void.self)
        let records = try await withThrowingTaskGroup(of: PublisherRecord.self) { group in
            for publisher in 0..<publishers {
                // Not reconnecting: a call under way when the daemon dies throws at once, where the default client
                // waits 30 s for the daemon to come back (which here is the test waiting for nothing).
                let client = try await NotifyClient.connect(to: daemon.socketPath, reconnectWithin: nil)
                let topics = (0..<topicsEach).map { "load.p\(publisher).t\($0)" } + ["load.shared.t\(publisher % 4)"]
                group.addTask { await Self.publishUntilTheDaemonDies(client, name: "p\(publisher)", topics: topics, progress: tick) }
            }
            // The crash comes in the middle of the load, once enough has been acknowledged (a load that stalls fails
            // the test at the deadline rather than hanging it).
            try await withDeadline(.seconds(120), waitingFor: "5,000 acknowledged publishes before the crash") {
                var acknowledged = 0
                for await _ in progress {
                    acknowledged += 1
                    if acknowledged == 5_000 { return }
                }
                throw TestFailure("the publishers ended after \(acknowledged) acknowledged publishes, before the crash")
            }
            try await daemon.kill()
            tick.finish()
            return try await group.reduce(into: []) { $0.append($1) }
        }

        let restarted = try await TestDaemon.start(in: directory, arguments: ["--sync", sync])
        let client = try await restarted.client()
        var checked = 0
        // Each topic's next number, asked for below all at once: under `sync = always` every one waits for an fsync,
        // and one after another they were most of the test's time.
        var numbered: [(topic: String, above: UInt64)] = []
        for record in records {
            for (topic, known) in record.topics {
                // Shared topics have several publishers; each one's view is checked below, once for the topic.
                guard !topic.hasPrefix("load.shared") else { continue }
                let latest = try await client.latest(Topic(topic))
                if let acknowledged = known.lastAcknowledged {
                    let inFlight = record.inFlight?.topic == topic ? record.inFlight?.text : nil
                    #expect(latest?.text == acknowledged.text || (inFlight != nil && latest?.text == inFlight),
                            "\(topic): latest \(latest?.text ?? "none"), last acknowledged \(acknowledged.text)")
                    #expect((latest?.sequence ?? 0) >= acknowledged.sequence)
                    checked += 1
                }
                numbered.append((topic, known.highestSequence))
            }
        }
        for shared in 0..<4 {
            let topic = "load.shared.t\(shared)"
            let highest = records.compactMap { $0.topics[topic]?.highestSequence }.max() ?? 0
            // Several publishers: the latest is the acknowledged one with the highest sequence, or one in flight.
            let newest = records.compactMap { $0.topics[topic]?.lastAcknowledged }.max { $0.sequence < $1.sequence }
            let inFlight = records.compactMap { $0.inFlight?.topic == topic ? $0.inFlight?.text : nil }
            let latest = try await client.latest(Topic(topic))
            if let newest {
                #expect(latest?.text == newest.text || inFlight.contains(latest?.text ?? ""), "\(topic): latest \(latest?.text ?? "none"), newest acknowledged \(newest.text)")
                #expect((latest?.sequence ?? 0) >= newest.sequence)
            }
            numbered.append((topic, highest))
        }
        let next = try await withThrowingTaskGroup(of: (String, UInt64, UInt64).self) { group in
            for (topic, above) in numbered {
                group.addTask { (topic, above, try await client.publishAcknowledged("after", to: Topic(topic))) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(next.count == numbered.count)
        for (topic, above, sequence) in next {
            #expect(sequence > above, "\(topic): \(sequence) after \(above): no sequence number is given twice")
        }
        #expect(checked >= publishers * topicsEach / 2, "enough topics were under test: \(checked)")
        await client.close()
        #expect(try await restarted.stop() == 0)
    }

    @Test("sync = always: 32 tasks pipelining acknowledged publishes on one connection all get their OKs (the connection is read again after each sync), and every last one survives kill -9")
    func pipelinedUnderSyncAlways() async throws {
        let directory = try TemporaryDirectory()
        let daemon = try await TestDaemon.start(in: directory, arguments: ["--sync", "always"])
        let client = try await daemon.client()
        let tasks = 32
        let each = 200
        let last = try await withDeadline(.seconds(60), waitingFor: "\(tasks * each) acknowledged publishes") {
            try await withThrowingTaskGroup(of: (String, UInt64).self) { group in
                for task in 0..<tasks {
                    group.addTask {
                        var sequence: UInt64 = 0
                        for count in 1...each { sequence = try await client.publishAcknowledged("#\(count)", to: Topic("pipe.t\(task)")) }
                        return ("pipe.t\(task)", sequence)
                    }
                }
                return try await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
            }
        }
        #expect(last.count == tasks && last.values.allSatisfy { $0 == UInt64(each) })
        await client.close()
        try await daemon.kill()

        let restarted = try await TestDaemon.start(in: directory, arguments: ["--sync", "always"])
        let reader = try await restarted.client()
        for task in 0..<tasks {
            let latest = try await reader.latest(Topic("pipe.t\(task)"))
            #expect(latest?.text == "#\(each)" && latest?.sequence == UInt64(each), "pipe.t\(task): \(latest?.text ?? "none")")
        }
        await reader.close()
        #expect(try await restarted.stop() == 0)
    }
}
