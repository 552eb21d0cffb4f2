// The entry point: see BlockingMain for why it is not an `async` `main`.
import ArgumentParser
import NotifyBus

#if canImport(Glibc)
import Glibc
#endif

// The NATS options of earlier releases moved to the fleet service: said in one sentence, not as unknown options.
if let moved = CommandLine.arguments.dropFirst().first(where: { $0.hasPrefix("--nats") || $0.hasPrefix("--host-name") }) {
    let option = String(moved.prefix { $0 != "=" })
    writeToStandardError(
        "notifyd: \(option) is notifyd-fleet's now: the fleet is its own service, a client of this daemon (run notifyd-fleet \(option) …, or under systemd enable notifyd-fleet.service; docs/federation.md, \"Moving a fleet\")"
    )
    exit(64)
}

BlockingMain.run { await Notifyd.main() }
