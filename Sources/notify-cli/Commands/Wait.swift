import ArgumentParser
import NotifyBus
import NotifySystem

struct Wait: AsyncParsableCommand, ConnectingCommand {
    static let configuration = CommandConfiguration(
        abstract: "Wait for a message on a topic and print it.",
        discussion: """
            Prints the topic's buffered message if it matches, else waits for the next one that does, and exits 0. \
            Without --equals any message matches. Exits 124 if --timeout runs out first.

            When the daemon goes away meanwhile (stopped, restarted, upgraded), notify wait says so on standard \
            error, connects again as soon as it is back, and goes on from the daemon's history (--history-messages \
            on the daemon), so a matching message published in between is not missed. --no-reconnect exits 69 \
            instead.

            Example: notify wait backup.status --equals done --timeout 3600 && start-the-next-job
            """
    )

    @ParentCommand var parent: Notify
    @OptionGroup var connection: ConnectionOptions

    @Argument(help: "The topic (or pattern) to wait on.")
    var topic: String

    @Option(name: .long, help: "Wait for a message whose payload is exactly this text.")
    var equals: String?

    @Option(name: .long, help: "Give up after this many seconds.")
    var timeout: Double?

    @Flag(name: .customLong("no-reconnect"), help: "Exit (69) when the daemon goes away, rather than reconnect and resume.")
    var noReconnect = false

    func validate() throws {
        if let timeout, !(timeout > 0 && timeout <= Listening.longestWait) {
            throw ValidationError("--timeout must be more than 0 seconds and at most \(Int(Listening.longestWait)) (about 31 years)")
        }
    }

    func run() async throws {
        try await runReportingFailures {
            let pattern = try parsePattern(topic)
            let outcome: ListeningOutcome
            if !noReconnect {
                let subscription = ResumingSubscription(socketPath: socketPath, patterns: [pattern], latestFirst: true, onConnectionChange: reportConnectionChange)
                outcome = try await listen(timeout: timeout, watchingOutput: false) { try await waitForMatch(in: subscription) }
            } else {
                let client = try await connect()
                let subscription = try await client.subscribe(to: [pattern], latestFirst: true)
                outcome = try await listen(timeout: timeout, watchingOutput: false) { try await waitForMatch(in: subscription) }
                await client.close()
            }
            if outcome == .timedOut {
                throw CommandFailure(.timeout, "--timeout ran out before a matching message came")
            }
        }
    }

    /// Prints the first message of `subscription` that matches, and returns.
    private func waitForMatch<Events: AsyncSequence>(in subscription: Events) async throws where Events.Element == SubscriptionEvent {
        let expected = equals.map { Array($0.utf8) }
        for try await event in subscription {
            switch event {
            case .message(let delivery) where expected == nil || delivery.bytes == expected:
                try StandardOutput.write(DeliveryFormat.raw.render(delivery))
                return
            case .message:
                continue
            case .dropped(let notice):
                StandardError.writeLine("notify: \(DeliveryFormat.sentence(notice))")
            }
        }
        throw CommandFailure(.unavailable, "the daemon closed the connection")
    }
}
