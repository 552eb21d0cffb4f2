import ArgumentParser

/// Load against a real notifyd (release build, started by the command itself): benchmarks that print figures,
/// and the soak test. `swift run -c release notifyd-load --help`.
@main
struct NotifydLoad: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "notifyd-load",
        abstract: "Load tests against a real notifyd: they print figures and never assert timings.",
        subcommands: [StalledSubscriber.self, SyncCost.self, TypedCost.self, Soak.self, ClientThroughput.self, HTTPStreams.self]
    )
}
