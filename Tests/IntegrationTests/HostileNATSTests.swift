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

    @Test("a message sent straight to the catch-up reader's inbox is not taken in, and the reply subject it names is not acknowledged")
    func forgedIntoTheConsumersInbox() async throws {
        let nats = try await NATSServerProcess.start()
        defer { nats.stop() }
        let forger = try await Forger.connect(to: nats)
        // Any client sees the reader's pull requests, and in them its inbox.
        let pulls = try await forger.connection.subscribe(to: "$JS.API.CONSUMER.MSG.NEXT.>")
        let acknowledgements = try await forger.connection.subscribe(to: "$JS.ACK.>")
        let forgedReplies = try await forger.connection.subscribe(to: "forged.reply")
        let beta = try await FederationTests.startHost("beta", servers: [nats])
        let alpha = try await FederationTests.startHost("alpha", servers: [nats])
        let inbox = try await withDeadline(.seconds(30), waitingFor: "beta's pull request") {
            for try await pull in pulls where pull.subject.hasSuffix(".beta") {
                if let replyTo = pull.replyTo { return replyTo }
            }
            throw NATSError("the pull requests ended")
        }

        var headers = NATSHeaders()
        for (name, value) in [("Notifyd-Host", "mallory"), ("Notifyd-Seq", "1"), ("Notifyd-Time", "\(Self.now)")] { headers.append(name, value) }
        try await forger.connection.publish(ByteBuffer(string: "forged"), to: inbox, headers: headers, replyTo: "forged.reply")
        try await forger.connection.flush()
        // Then a real export: its delivery is acknowledged after the forged message was dealt with (one connection,
        // in order), so by then an acknowledgement of the forged one would have come first.
        let onAlpha = try await alpha.client()
        try await onAlpha.publishAcknowledged("real", to: Topic("demo.real"))
        let betaAcknowledged = try await withDeadline(.seconds(30), waitingFor: "beta's acknowledgement of the real export") {
            for try await acknowledgement in acknowledgements where acknowledgement.subject.contains(".beta.") { return true }
            return false
        }
        #expect(betaAcknowledged)
        let onBeta = try await beta.client()
        try await FederationTests.waitForCounter("nats_imported", toReach: 1, on: onBeta)
        let forgedReply = try await withDeadline(.seconds(5), waitingFor: "the forger's flush") { () -> String? in
            try await forger.connection.publish(ByteBuffer(string: "end"), to: "forged.reply")
            for try await reply in forgedReplies { return String(buffer: reply.payload) }
            return nil
        }
        #expect(forgedReply == "end", "beta published nothing to the reply subject the forged message named")
        #expect(try await onBeta.stats()["nats_imported"] == 1, "only the real export was taken in")
        await onBeta.close()
        await onAlpha.close()
        await forger.close()
        _ = try await alpha.stop()
        _ = try await beta.stop()
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
