import ArgumentParser
import NotifyBus

struct Clear: ParsableCommand, ConnectingCommand {
    static let configuration = CommandConfiguration(
        abstract: "Forget the buffered latest message of a topic, without sending anything.",
        discussion: "Subscribers are not told. The topic's sequence numbers continue where they were."
    )

    @ParentCommand var parent: Notify
    @OptionGroup var connection: ConnectionOptions

    @Argument(help: "The topic.")
    var topic: String

    func run() throws {
        try runReportingFailures {
            let topic = try parseTopic(topic)
            let connection = try openConnection()
            try connection.clear(topic)
            connection.close()
        }
    }
}
