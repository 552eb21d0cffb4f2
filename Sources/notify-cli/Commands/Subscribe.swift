import ArgumentParser
import NotifyBus
import NotifySystem

struct Subscribe: AsyncParsableCommand, ConnectingCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the messages published to topics matching the patterns, as they come.",
        discussion: """
            Each message is written to standard output as soon as it arrives (messages that arrive together are \
            written together, with one write; none waits for more), so the output can be piped: notify subscribe \
            'backup.>' | grep failed.

            Formats: raw prints the payload, line prints `topic payload`, json prints one object per line with \
            topic, seq, time (RFC 3339), uid, pid, unit and payload (or payload_base64 when the payload is not \
            UTF-8). raw and line end each message with a line break unless its payload already ends with one.

            Without --count, notify subscribe runs until interrupted or until --timeout. When the daemon goes away \
            (stopped, restarted, upgraded), it says so on standard error, connects again as soon as the daemon is \
            back, and resumes after the last message it printed, from the daemon's history (--history-messages on \
            the daemon; what the history no longer holds is announced like a drop). --no-reconnect exits 69 instead. With --count, it exits 0 after that many messages, or 124 if --timeout comes first. When \
            the reader of its output goes away (notify subscribe 'x.>' | head -1, once head has its line), it \
            exits 0 at once.

            notify subscribe writes at the pace its reader takes the output, and reads no further ahead than a few \
            MiB. A subscriber that falls behind (its reader is slower than the publishers) has messages queued for it \
            in the daemon, up to the daemon's limit; past that, --overflow says what happens: drop-oldest (the default) drops the oldest \
            queued messages, latest-only keeps only the newest queued message of each topic, disconnect ends the \
            subscription (exit 69). What is dropped is announced: a line on standard error saying which bound dropped \
            it (this subscriber's queue, the topic's history, a topic the daemon forgot, other hosts' messages lost on \
            their way), or with --format json a record {"dropped": {"topic", "count", "first_seq", "last_seq", \
            "reason"}} in the output (reason: queue, history, forgotten, fleet, or null from an older daemon).

            --since resumes from the topics' history (the daemon keeps each topic's last messages): --since SEQ \
            prints what came after that sequence number of the one topic named, --since TIME (RFC 3339: \
            2026-11-25T09:30:00Z, or with an offset such as +01:00) what came after that time on every topic \
            matching, then live messages, with no gap and no repeat. What the history no longer holds is announced \
            like a drop. Messages the daemon read together share a time: --since a message's own time starts after \
            its whole batch, a microsecond earlier starts with that batch, the message included.
            """
    )

    @ParentCommand var parent: Notify
    @OptionGroup var connection: ConnectionOptions

    @Argument(help: "Topics or patterns: * matches one token, a final > one or more.")
    var patterns: [String]

    @Option(name: .long, help: "Exit after this many messages.")
    var count: Int?

    @Option(name: .long, help: "Stop after this many seconds.")
    var timeout: Double?

    @Flag(name: .long, help: "Start with the buffered latest message of each matching topic.")
    var latest = false

    @Option(name: .long, help: ArgumentHelp("Start after this sequence number of the one topic named, or after this RFC 3339 time.", valueName: "seq|time"))
    var since: String?

    @Option(name: .long, help: "raw, line or json.")
    var format: DeliveryFormat = .line

    @Option(name: .long, help: "When this subscriber falls behind: drop-oldest, latest-only or disconnect.")
    var overflow: OverflowPolicy = .dropOldest

    @Flag(name: .customLong("no-reconnect"), help: "Exit (69) when the daemon goes away, rather than reconnect and resume.")
    var noReconnect = false

    func validate() throws {
        if patterns.isEmpty { throw ValidationError("give at least one topic or pattern to subscribe to") }
        if let count, count < 1 { throw ValidationError("--count must be at least 1") }
        if let timeout, !(timeout > 0 && timeout <= Listening.longestWait) {
            throw ValidationError("--timeout must be more than 0 seconds and at most \(Int(Listening.longestWait)) (about 31 years)")
        }
        if since != nil && latest { throw ValidationError("--latest and --since exclude each other: give one") }
        if case .sequence? = try resumePoint(),
            patterns.count != 1 || patterns[0].contains(where: { $0 == "*" || $0 == ">" })
        {
            throw ValidationError("--since SEQ resumes one topic, named exactly; for patterns, give a time (--since 2026-11-25T09:30:00Z)")
        }
    }

    /// Prints the events of `subscription` until --count, or until nobody reads the output.
    ///
    /// What is at hand is rendered into one buffer and written with one `write` once nothing more is (or 64 KiB
    /// gathered): a batch the connection read together costs one system call, and a message that comes alone is
    /// written as soon as it comes, so `notify subscribe | grep` sees each at once.
    private func print<Events: AsyncSequence>(_ subscription: Events) async throws
    where Events.AsyncIterator: EventsAtHand {
        var events = subscription.makeAsyncIterator()
        // Options read once: each read of an option's value costs a lookup in what was parsed.
        let format = self.format
        let count = self.count
        var output: [UInt8] = []
        output.reserveCapacity(Self.outputChunk + 4096)
        var received = 0
        // false: nobody reads any more, as good a reason to stop as --count.
        func write() throws -> Bool {
            defer { output.removeAll(keepingCapacity: true) }
            return output.isEmpty ? true : try StandardOutput.write(output)
        }
        while var event = try await events.next() {
            // What came with it is taken without a suspension point per event, and written together.
            while true {
                switch event {
                case .message(let delivery):
                    format.render(delivery, into: &output)
                    received += 1
                    if received == count { _ = try write(); return }
                case .dropped(let notice):
                    if format == .json {
                        output.append(contentsOf: (DeliveryFormat.json(notice) + "\n").utf8)
                    } else {
                        // In its place among the messages: what was printed before it goes first.
                        guard try write() else { return }
                        StandardError.writeLine("notify: \(DeliveryFormat.sentence(notice))")
                    }
                }
                if output.count >= Self.outputChunk {
                    guard try write() else { return }
                }
                guard let next = events.nextAtHand() else { break }
                event = next
            }
            guard try write() else { return }
        }
        guard try write() else { return }
        throw CommandFailure(.unavailable, "the daemon closed the connection")
    }

    /// How much output is gathered at most before it is written.
    static let outputChunk = 64 << 10

    /// Where --since resumes, if given.
    func resumePoint() throws -> ResumePoint? {
        guard let since else { return nil }
        if let sequence = UInt64(since) { return .sequence(sequence) }
        if let time = PublishTime(rfc3339: since) { return .time(time) }
        throw ValidationError("--since takes a sequence number or an RFC 3339 time (2026-11-25T09:30:00Z), not \"\(since)\"")
    }

    func run() async throws {
        try await runReportingFailures {
            let patterns = try self.patterns.map(parsePattern)
            let outcome: ListeningOutcome
            if !noReconnect {
                let subscription = ResumingSubscription(
                    socketPath: socketPath,
                    patterns: patterns,
                    latestFirst: latest,
                    since: try resumePoint(),
                    overflow: overflow,
                    onConnectionChange: reportConnectionChange
                )
                outcome = try await listen(timeout: timeout, watchingOutput: true) { try await print(subscription) }
            } else {
                let client = try await connect()
                let subscription = try await client.subscribe(to: patterns, latestFirst: latest, since: try resumePoint(), overflow: overflow)
                outcome = try await listen(timeout: timeout, watchingOutput: true) { try await print(subscription) }
                await client.close()
            }
            if outcome == .timedOut, let count {
                let messages = count == 1 ? "the message" : "\(count) messages"
                throw CommandFailure(.timeout, "--timeout ran out before \(messages) came")
            }
        }
    }
}
