import ArgumentParser
import NotifySystem

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What the `notifyd` executable runs: everything of the daemon is in this library, so its tests drive it without
/// starting a process, and `main.swift` is this one call.
package enum DaemonEntry {
    /// Runs the daemon with the process's arguments until it stops (it exits with the status it ends with); `arguments`
    /// are checked first for the options that moved to notifyd-fleet.
    package static func run(_ arguments: [String] = CommandLine.arguments) {
        if let sentence = movedOptionSentence(arguments) {
            StandardError.writeLine(sentence)
            exit(64)
        }
        BlockingMain.run { await Notifyd.main() }
    }

    /// The NATS options of earlier releases moved to the fleet service: said in one sentence, not as unknown options.
    static func movedOptionSentence(_ arguments: [String]) -> String? {
        guard let moved = arguments.dropFirst().first(where: { $0.hasPrefix("--nats") || $0.hasPrefix("--host-name") })
        else { return nil }
        let option = String(moved.prefix { $0 != "=" })
        return "notifyd: \(option) is notifyd-fleet's now: the fleet is its own service, a client of this daemon (run notifyd-fleet \(option) …, or under systemd enable notifyd-fleet.service; docs/federation.md, \"Moving a fleet\")"
    }
}
