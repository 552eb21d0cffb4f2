import ArgumentParser
import NotifyBus

struct Explain: ParsableCommand, ConnectingCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show which access rule decides publishing to and reading a topic.",
        discussion: """
            For you, as the daemon sees you (your uid, groups and unit), or, for root, for another uid with its \
            groups. One line per access: publish (which includes clearing the buffered message) and read \
            (subscribing, and asking for the buffered message). The first rule that applies decides: the \
            administrator's [rules] in the daemon's configuration, in order, then the built-in ones. Exit status 0 \
            whatever the answer; 77 when asking about another uid without being root.
            """
    )

    @ParentCommand var parent: Notify
    @OptionGroup var connection: ConnectionOptions

    @Argument(help: "The topic.") var topic: String

    @Option(help: "Ask for this uid instead of yourself (root only).") var uid: UInt32?

    @Option(name: .long, help: "table (a line per access) or json.")
    var format: TableFormat = .table

    func run() throws {
        try runReportingFailures {
            let connection = try openConnection()
            let explanation = try connection.explain(topic, uid: uid)
            connection.close()
            switch format {
            case .table:
                for decision in explanation.decisions {
                    try StandardOutput.write("\(decision.access): \(decision.isAllowed ? "allowed" : "denied") for uid \(explanation.uid), by \(decision.rule)\n")
                }
            case .json:
                var json = JSONTextWriter()
                json.beginObject()
                json.field("uid", UInt64(explanation.uid))
                json.field("topic", topic)
                for decision in explanation.decisions {
                    json.field(decision.access, decision.isAllowed)
                    json.field(decision.access + "_rule", decision.rule)
                }
                json.endObject()
                try StandardOutput.write(json.text + "\n")
            }
        }
    }
}
