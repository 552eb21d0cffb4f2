import ArgumentParser
import NotifyBus

struct History: AsyncParsableCommand, ConnectingCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the last messages of a topic's history, oldest first.",
        discussion: """
            The daemon keeps each topic's last messages: 64 of them, at most 64 KiB, unless told otherwise \
            (--history-messages, --history-bytes, and [history] in its configuration). Prints nothing and exits 0 when the history is empty. Formats as for \
            notify subscribe.
            """
    )

    @ParentCommand var parent: Notify
    @OptionGroup var connection: ConnectionOptions

    @Argument(help: "The topic.")
    var topic: String

    @Option(name: .long, help: "Only the last this many messages.")
    var count: Int?

    @Option(name: .long, help: "raw, line or json.")
    var format: DeliveryFormat = .line

    func validate() throws {
        if let count, count < 0 { throw ValidationError("--count must be 0 or more") }
    }

    func run() async throws {
        try await runReportingFailures {
            let topic = try parseTopic(topic)
            let client = try await connect()
            let messages = try await client.history(of: topic, count: count)
            await client.close()
            // Rendered together and written in chunks: one write per 64 KiB, not one per message.
            var output: [UInt8] = []
            for delivery in messages {
                format.render(delivery, into: &output)
                if output.count >= Subscribe.outputChunk {
                    guard try StandardOutput.write(output) else { return }
                    output.removeAll(keepingCapacity: true)
                }
            }
            if !output.isEmpty { try StandardOutput.write(output) }
        }
    }
}
