import ArgumentParser
import NotifyBus

struct Latest: ParsableCommand, ConnectingCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the buffered latest message of a topic.",
        discussion: """
            Exits 1 when nothing is buffered for the topic: it has no messages yet, was cleared, or only got \
            messages sent with --no-retain. --format json prints the same object as notify subscribe --format json.
            """
    )

    @ParentCommand var parent: Notify
    @OptionGroup var connection: ConnectionOptions

    @Argument(help: "The topic.")
    var topic: String

    /// The formats that make sense for one message read on purpose: `line` would repeat the topic just asked for.
    enum Format: String, ExpressibleByArgument, CaseIterable {
        case raw, json

        var deliveryFormat: DeliveryFormat { self == .raw ? .raw : .json }
    }

    @Option(name: .long, help: "raw or json.")
    var format: Format = .raw

    func run() throws {
        try runReportingFailures {
            let topic = try parseTopic(topic)
            let connection = try openConnection()
            let delivery = try connection.latest(topic)
            connection.close()
            guard let delivery else {
                throw CommandFailure(
                    .checkFailed,
                    "nothing is buffered for topic \"\(topic.name)\"; notify wait \(topic.name) waits for its next message"
                )
            }
            try StandardOutput.write(format.deliveryFormat.render(delivery))
        }
    }
}
