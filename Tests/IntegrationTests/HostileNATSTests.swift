import Foundation
import NATSClient
import NATSTestSupport
import NIOCore
import NotifyBus
import Testing

/// Any client of the NATS server can publish under the bridge's prefix with whatever provenance headers it likes: a
/// raw NATS client on a real nats-server forges them, and a real daemon must refuse or bound each claim, stay up,
/// keep its local subscribers connected, and read its own state log back after a restart (issue 34).
@Suite("A hostile NATS publisher (real nats-server and notifyd)", .timeLimit(.minutes(10)))
struct HostileNATSTests {
    /// A raw NATS client that publishes under the bridge's subjects with headers of its choosing.
    struct Forger {
        let connection: NATSConnection

        static func connect(to server: NATSServerProcess) async throws -> Forger {
            Forger(connection: try await NATSConnection.connect(host: "127.0.0.1", port: server.port, name: "forger"))
        }

        /// Publishes `payload` to `topic` with `fields` as headers, live and, with `latest`, to the stream of
        /// latest messages too; returns once the server has it.
        func publish(_ topic: String, _ payload: ByteBuffer, _ fields: [(String, String)], latest: Bool = false) async throws {
            var headers = NATSHeaders()
            for (name, value) in fields { headers.append(name, value) }
            try await connection.publish(payload, to: "notifyd." + topic, headers: headers)
            if latest { try await connection.publish(payload, to: "notifyd-latest." + topic, headers: headers) }
            try await connection.flush()
        }

        func close() async { await connection.close() }
    }

    static var now: UInt64 { PublishTime.now().microsecondsSinceEpoch }

    @Test("forged export numbers (far ahead, going back, a newer run, a log position past the end) never silence or hold back the real host: the log never shows them, so they are let go of, counted and logged")
    func forgedExportNumbers() async throws {
        let nats = try await NATSServerProcess.start()
        defer { nats.stop() }
        let forger = try await Forger.connect(to: nats)
        let live = try await forger.connection.subscribe(to: "notifyd.>")
        let alpha = try await FederationTests.startHost("alpha", servers: [nats])
        let beta = try await FederationTests.startHost("beta", servers: [nats])
        let onBeta = try await beta.client()
        let watcher = try startNotify(["subscribe", "demo.>", "--format", "line"], socket: beta.socketPath)
        try await BackpressureTests.waitForSubscriptions(1, on: onBeta)
        // Alpha's run, as any client of the server reads it from a live message.
        #expect(try await alpha.notify(["send", "demo.first", "1"]).status == 0)
        let stamp = try await withDeadline(.seconds(30), waitingFor: "alpha's first export") { () -> ExportStampText in
            for try await message in live where message.subject == "notifyd.demo.first" {
                // `Notifyd: 1 <host> <uid> <pid> <seq> <time> <kind> <export> <log> <unit>`: the export is the 8th field.
                if let fields = message.headers?["Notifyd"]?.split(separator: " "), fields.count == 10 { return ExportStampText(String(fields[7])) }
            }
            throw NATSError("the subscription ended")
        }
        try await watcher.standardOutput.wait("alpha's first message at beta") { $0.contains("demo.first 1") }

        let now = Self.now
        func forge(_ topic: String, export: String, log: String) async throws {
            try await forger.publish(topic, ByteBuffer(string: "forged"), [
                ("Notifyd-Host", "alpha"), ("Notifyd-Seq", "\(Int.random(in: 100...900))"), ("Notifyd-Time", "\(now)"),
                ("Notifyd-Export", export), ("Notifyd-Log", log),
            ])
        }
        try await forge("demo.ahead", export: "\(stamp.epoch)-\(stamp.number + 1_000_000)", log: "0")
        try await forge("demo.back", export: "\(stamp.epoch)-1", log: "0")
        try await forge("demo.run", export: "9999999999999999999-5", log: "999999999999")
        // Alpha's real next message comes at once: nothing forged holds it back.
        #expect(try await alpha.notify(["send", "demo.real", "2"]).status == 0)
        try await watcher.standardOutput.wait("alpha's real message at beta") { $0.contains("demo.real 2") }
        // And after them, alpha goes on as before: nothing of it is skipped or silenced.
        for index in 3...5 { #expect(try await alpha.notify(["send", "demo.after", "\(index)"]).status == 0) }
        try await watcher.standardOutput.wait("alpha's later messages at beta") { $0.contains("demo.after 5") }
        let stats = try await FederationTests.stats(of: onBeta) { ($0["nats_import_unconfirmed"] ?? 0) >= 1 }
        #expect((stats["nats_import_unconfirmed"] ?? 0) >= 1, "what the log never showed is counted: \(stats)")
        #expect((stats["nats_import_repeated"] ?? 0) >= 1, "a number going back is a repeat: \(stats)")
        #expect((stats["nats_log_records_read"] ?? 0) < 200, "the reads are bounded: \(stats)")
        #expect(stats["nats_catch_up_missed"] == 0, "no forged gap is announced as a loss: \(stats)")
        #expect(beta.log.contains("were not taken in: its log did not show them"), "\(beta.log)")
        let lines = watcher.standardOutput.lines
        #expect(lines == ["demo.first 1", "demo.real 2", "demo.after 3", "demo.after 4", "demo.after 5"], "alpha's own, each once, in order, nothing forged: \(lines)")
        watcher.signal(SIGTERM)
        _ = try await watcher.exitStatus()
        await onBeta.close()
        await forger.close()
        try await alpha.stop()
        try await beta.stop()
    }

    /// An export stamp as a raw NATS client reads it: `<epoch>-<number>`.
    struct ExportStampText {
        var epoch: UInt64 = 0
        var number: UInt64 = 0

        init(_ text: String) {
            let parts = text.split(separator: "-")
            if parts.count == 2 {
                epoch = UInt64(parts[0]) ?? 0
                number = UInt64(parts[1]) ?? 0
            }
        }
    }

    @Test("a forged Notifyd-Seq past 2^61 and a time a day ahead are refused; resumes, latest and a restart go on, and the real host is not silenced")
    func forgedNumbers() async throws {
        let nats = try await NATSServerProcess.start()
        defer { nats.stop() }
        let directory = try TemporaryDirectory()
        let beta = try await FederationTests.startHost("beta", servers: [nats], in: directory)
        let onBeta = try await beta.client()
        let watcher = try startNotify(["subscribe", "demo.>", "--format", "line"], socket: beta.socketPath)
        try await BackpressureTests.waitForSubscriptions(1, on: onBeta)
        let forger = try await Forger.connect(to: nats)

        let now = Self.now
        try await forger.publish("demo.x", ByteBuffer(string: "forged"), [
            ("Notifyd-Host", "alpha"), ("Notifyd-Seq", "9999999999999999999"), ("Notifyd-Time", "\(now)"),
        ], latest: true)
        try await forger.publish("demo.y", ByteBuffer(string: "from the future"), [
            ("Notifyd-Host", "alpha"), ("Notifyd-Seq", "1000"), ("Notifyd-Time", "\(now + 86_400_000_000)"),
        ])
        try await FederationTests.waitForCounter("nats_import_refused", toReach: 2, on: onBeta)
        // The real host's next message of demo.y is taken in, not skipped as a repeat of the forged one.
        try await forger.publish("demo.y", ByteBuffer(string: "real"), [("Notifyd-Host", "alpha"), ("Notifyd-Seq", "7"), ("Notifyd-Time", "\(now)")])
        try await FederationTests.waitForCounter("nats_imported", toReach: 1, on: onBeta)
        try await watcher.standardOutput.wait("the real message at the local subscriber") { $0.contains("demo.y real") }

        // What a user does next: resume by number and by time, ask for the latest.
        let byNumber = try await beta.notify(["subscribe", "demo.x", "--since", "0", "--count", "1", "--timeout", "0.5"])
        #expect(byNumber.status == 124, "\(byNumber.status) \(byNumber.output) \(byNumber.stderr)")
        let byTime = try await beta.notify(["subscribe", "demo.>", "--since", "1970-01-01T00:00:00Z", "--count", "1"])
        #expect(byTime.status == 0 && byTime.output == "demo.y real\n", "\(byTime.output) \(byTime.stderr)")
        #expect(try await beta.notify(["latest", "demo.x"]).status == 1, "nothing of the forged message is buffered")
        let stats = try await onBeta.stats()
        #expect(stats["nats_import_refused"] == 2 && stats["nats_imported"] == 1 && stats["nats_import_repeats"] == 0, "\(stats)")
        #expect(watcher.isRunning, "the local subscriber keeps its connection")
        #expect(beta.log.contains("past the largest this host takes in"), "the first refusal is in the journal (then one in 1,000)")
        await onBeta.close()

        // Restarted, it reads the stream of latest messages again, forged one included: refused again, not a crash.
        #expect(try await beta.stop() == 0)
        let again = try await FederationTests.startHost("beta", servers: [nats], in: directory)
        let onAgain = try await again.client()
        try await FederationTests.waitForCounter("nats_import_refused", toReach: 1, on: onAgain)
        let resumed = try await again.notify(["subscribe", "demo.>", "--since", "1970-01-01T00:00:00Z", "--count", "1"])
        #expect(resumed.status == 0 && resumed.output == "demo.y real\n", "\(resumed.output) \(resumed.stderr)")
        #expect(!again.log.contains("damaged"), "\(again.log)")
        try await watcher.standardError.wait("the local subscriber back after the restart") { $0.contains("reconnected") }
        #expect(try await again.notify(["send", "demo.after", "restart"]).status == 0)
        try await watcher.standardOutput.wait("a local publish at the local subscriber") { $0.contains("demo.after restart") }
        watcher.signal(SIGTERM)
        _ = try await watcher.exitStatus()
        await onAgain.close()
        await forger.close()
        #expect(try await again.stop() == 0)
    }

    @Test("a 70,000-byte Notifyd-Unit is taken in as no unit, a 100,000-byte import under --max-payload 1024 is refused, claimed uids are nobody's after a restart")
    func forgedProvenance() async throws {
        let nats = try await NATSServerProcess.start()
        defer { nats.stop() }
        let directory = try TemporaryDirectory()
        // Read live (no catch-up): JetStream stores no message with over 64 KiB of headers, so through the stream of
        // exports the 70,000-byte unit would never reach the daemon at all.
        let limits = ["--max-payload", "1024", "--max-retained-topics-per-user", "3", "--nats-catch-up", "0"]
        let beta = try await FederationTests.startHost("beta", servers: [nats], arguments: limits, in: directory)
        let onBeta = try await beta.client()
        let watcher = try startNotify(["subscribe", "demo.>", "--format", "json"], socket: beta.socketPath)
        try await BackpressureTests.waitForSubscriptions(1, on: onBeta)
        let forger = try await Forger.connect(to: nats)

        let claim = { (sequence: Int) in
            [("Notifyd-Host", "alpha"), ("Notifyd-Uid", "\(getuid())"), ("Notifyd-Seq", "\(sequence)"), ("Notifyd-Time", "\(Self.now)")]
        }
        try await forger.publish("demo.unit", ByteBuffer(string: "hello"), claim(1) + [("Notifyd-Unit", String(repeating: "u", count: 70_000))], latest: true)
        try await forger.publish("demo.big", ByteBuffer(repeating: 0x62, count: 100_000), claim(1))
        try await forger.publish("demo.claim1", ByteBuffer(string: "c"), claim(1))
        try await forger.publish("demo.claim2", ByteBuffer(string: "c"), claim(1))
        try await FederationTests.waitForCounter("nats_imported", toReach: 3, on: onBeta)
        try await FederationTests.waitForCounter("nats_import_refused", toReach: 1, on: onBeta)
        try await watcher.standardOutput.wait("the three imports at the local subscriber") { $0.contains("demo.claim2") }
        let lines = watcher.standardOutput.lines
        #expect(lines.count == 3 && lines[0].contains(#""unit":null"#) && lines[0].contains(#""payload":"hello""#), "\(lines)")
        #expect(!lines.joined().contains("demo.big"))
        let latest = try await beta.notify(["latest", "demo.unit"])
        #expect(latest.status == 0 && latest.output == "hello\n", "\(latest.output) \(latest.stderr)")
        #expect(beta.log.contains("over this daemon's max-payload (1024)"))
        #expect(watcher.isRunning, "the local subscriber keeps its connection")
        await onBeta.close()

        #expect(try await beta.stop() == 0)
        let again = try await FederationTests.startHost("beta", servers: [nats], arguments: limits, in: directory)
        #expect(!again.log.contains("damaged") && !again.log.contains("kept aside"), "\(again.log)")
        let restored = try await again.notify(["latest", "demo.unit"])
        #expect(restored.status == 0 && restored.output == "hello\n", "\(restored.stderr)")
        // Three buffered messages claim this uid; restored, they are still nobody's, so its own publish is no fourth.
        let own = try await again.notify(["send", "demo.mine", "mine"])
        #expect(own.status == 0, "\(own.stderr)")
        let topics = try await again.notify(["topics", "demo.>"])
        #expect(topics.status == 0 && topics.output.contains("demo.mine"), "\(topics.output)")
        watcher.signal(SIGTERM)
        _ = try await watcher.exitStatus()
        await forger.close()
        #expect(try await again.stop() == 0)
    }
}
