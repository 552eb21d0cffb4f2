import ArgumentParser
import NotifyBus

struct Stats: ParsableCommand, ConnectingCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the daemon's counters.",
        discussion: """
            connections and subscriptions open now, connections_total accepted since the daemon started; topics \
            known and retained (with a buffered message) and their retained_bytes; history_messages and history_bytes \
            (what the topics' histories keep); messages_in (publishes) and \
            messages_out (deliveries) with their payload bytes_in and bytes_out; dropped (deliveries dropped for \
            subscribers that fell behind); queued_bytes (waiting now for connections that fell behind); uptime_seconds; reloads and reloads_failed (configuration reloads \
            applied and refused); pid (the daemon's process id). With a fleet user set (fleet-user): fleet_linked and \
            the daemon's nats_imported, nats_clears_imported, nats_import_refused, nats_import_repeats, \
            nats_not_exported, then the fleet service's (nats_connected, nats_exported, the outbox's, catch-up's; \
            docs/federation.md). Per-topic counters: notify topics.
            """
    )

    @ParentCommand var parent: Notify
    @OptionGroup var connection: ConnectionOptions

    @Option(name: .long, help: "table or json.")
    var format: TableFormat = .table

    func run() throws {
        try runReportingFailures {
            let connection = try openConnection()
            let stats = try connection.stats()
            connection.close()
            switch format {
            case .table:
                try StandardOutput.write(renderTable([["COUNTER", "VALUE"]] + stats.counters.map { [$0.name, String($0.value)] }))
            case .json:
                var json = JSONTextWriter()
                json.beginObject()
                for counter in stats.counters { json.field(counter.name, counter.value) }
                json.endObject()
                try StandardOutput.write(json.text + "\n")
            }
        }
    }
}
