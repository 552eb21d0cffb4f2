import ArgumentParser
import NotifyBus

struct Topics: ParsableCommand, ConnectingCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the topics the daemon knows, with their counters.",
        discussion: """
            For each topic: its last sequence number, the size of its buffered message (- when none), the messages \
            published and the deliveries made since the daemon started, and when its last message was published.
            """
    )

    @ParentCommand var parent: Notify
    @OptionGroup var connection: ConnectionOptions

    @Argument(help: "Only topics matching this pattern.")
    var pattern: String?

    @Option(name: .long, help: "table or json.")
    var format: TableFormat = .table

    func run() throws {
        try runReportingFailures {
            let pattern = try self.pattern.map(parsePattern)
            let connection = try openConnection()
            let topics = try connection.topics(matching: pattern)
            connection.close()
            switch format {
            case .table:
                var rows = [["TOPIC", "SEQ", "RETAINED", "PUBLISHED", "DELIVERED", "DROPPED", "LAST PUBLISHED"]]
                for info in topics {
                    rows.append([
                        info.topic.name, String(info.sequence), info.retainedBytes.map { "\($0) B" } ?? "-",
                        String(info.published), String(info.delivered), String(info.dropped),
                        info.lastPublished?.rfc3339 ?? "-",
                    ])
                }
                try StandardOutput.write(renderTable(rows))
            case .json:
                var json = JSONTextWriter()
                json.beginArray()
                for info in topics {
                    json.beginObject()
                    json.field("topic", info.topic.name)
                    json.field("seq", info.sequence)
                    json.key("retained_bytes")
                    if let bytes = info.retainedBytes { json.number(UInt64(bytes)) } else { json.null() }
                    json.field("published", info.published)
                    json.field("delivered", info.delivered)
                    json.field("dropped", info.dropped)
                    json.field("last_published", info.lastPublished?.rfc3339)
                    json.endObject()
                }
                json.endArray()
                try StandardOutput.write(json.text + "\n")
            }
        }
    }
}
