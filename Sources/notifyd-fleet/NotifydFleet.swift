import ArgumentParser
import ConfigurationFiles
import Logging
import NIOCore
import NIOPosix
import NotifyBus
import NotifyFleet
import UnixSignals
import NotifySystem

#if canImport(Glibc)
import Glibc
#endif

/// `notifyd-fleet`: this host's daemon in a fleet of hosts through NATS, as a client of the daemon (issue 47). The
/// daemon stays off the network and links no NATS or TLS code; this service alone talks to the network.
@main
struct NotifydFleet: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "notifyd-fleet",
        abstract: "Shares this host's notifyd topics with other hosts' through NATS.",
        discussion: """
            A client of the daemon on --socket (protocol 5): it follows the host's publishes of the topics \
            --nats-export names that user nobody may read there, and sends them to NATS on <prefix>.<topic> with their \
            provenance; other hosts' messages of the topics --nats-import names go to the daemon, which publishes them \
            as user nobody with their origin host and checks every claim in them. Only the daemon's fleet-user may do \
            this (by default the system user notifyd-fleet, which the package's notifyd-fleet.service runs as). \
            Retained messages are also kept in a JetStream stream, so a host that starts later answers `notify \
            latest` with the fleet's latest. Every export is numbered and also appended, batched, to a log stream kept for \
            --nats-catch-up (1h by default), which a host reads only to fill a gap in an origin's numbers or to take in \
            what it missed while away, in order; it is told (a DROP) of what was older than the log keeps. Where this \
            host stands in each origin's numbers is kept in --state-dir, not on the server. A CLEAR crosses too. While NATS is \
            unreachable, local traffic goes on and exports wait in a bounded outbox (--nats-outbox-bytes). While the \
            daemon is away, this service stays off NATS.

            The settings are those of the [nats] section of the daemon's configuration file (notifyd.conf; --config): \
            servers, export, import, prefix, host-name, outbox-bytes, stream-replicas, catch-up, catch-up-bytes, and \
            for TLS and logins tls-ca, tls-cert, tls-key, user, password-file, token-file, nkey-file, credentials \
            (secrets from files readable by their owner only; a tls:// server, one that requires it, or any server \
            when tls-ca, tls-cert, a password or a token is given, is reached over TLS only). Options win over the \
            file. SIGHUP reads it again. The counters are in `notify stats` (nats_…).

            Exit status: 0 after SIGTERM or SIGINT (or a --reload asked); 64 for bad options; 78 for settings that \
            cannot be used; 1 when --reload cannot reach the process.
            """
    )

    @Option(name: .long, help: ArgumentHelp("The daemon's socket (default: as notify finds it).", valueName: "path"))
    var socket: String?

    @Option(name: .long, help: ArgumentHelp("The configuration file whose [nats] section to read (default: the daemon's notifyd.conf).", valueName: "path"))
    var config: String?

    @Option(
        name: .customLong("state-dir"),
        help: ArgumentHelp(
            "Where to keep where this host stands in the fleet's log, so a restart takes in what it missed (default: $STATE_DIRECTORY, which the unit sets to /var/lib/notifyd-fleet; with neither, a restart starts from the log's end).",
            valueName: "path"
        )
    )
    var stateDirectory: String?

    @Flag(name: .customLong("check-config"), help: "Check the settings, print them (never a secret), and exit.")
    var checkConfig = false

    @Option(
        name: .customLong("reload"),
        help: ArgumentHelp("Ask the running fleet service of this pid to read its settings again (SIGHUP), and exit: for ExecReload=.", valueName: "pid")
    )
    var reloadPID: Int32?

    @Option(name: .customLong("log-level"), help: ArgumentHelp("trace, debug, info, notice, warning, error or critical (default: info).", valueName: "level"))
    var logLevel: String = "info"

    @Option(
        name: .customLong("nats"),
        help: ArgumentHelp(
            "A NATS server to share topics with other hosts through (nats://HOST:PORT); repeat it for the servers of one cluster, tried in turn.",
            valueName: "url"
        )
    )
    var natsServers: [String] = []

    @Option(
        name: .customLong("nats-export"),
        help: ArgumentHelp(
            "local topics sent to other hosts, of those user nobody may read here (repeatable; default: every topic but $… and user.…).",
            valueName: "pattern"
        )
    )
    var natsExports: [String] = []

    @Option(
        name: .customLong("nats-import"),
        help: ArgumentHelp("other hosts' topics taken in (repeatable; default: every topic but $… and user.…).", valueName: "pattern")
    )
    var natsImports: [String] = []

    @Option(
        name: .customLong("nats-prefix"),
        help: ArgumentHelp("the first tokens of the NATS subjects used, <prefix>.<topic> (default: notifyd).", valueName: "prefix")
    )
    var natsPrefix: String?

    @Option(
        name: .customLong("nats-outbox-bytes"),
        help: ArgumentHelp(
            "the most bytes of messages waiting for NATS while it is unreachable, each uid an equal part; past it they are not sent, and counted (default: 16777216).",
            valueName: "bytes"
        )
    )
    var natsOutboxBytes: Int?

    @Option(
        name: .customLong("nats-stream-replicas"),
        help: ArgumentHelp(
            "copies a NATS cluster keeps of the streams (latest messages, catch-up), when this service makes them, 1 to 5 (default: 1; in a cluster, 3 survives the loss of a server).",
            valueName: "count"
        )
    )
    var natsStreamReplicas: Int?

    @Option(
        name: .customLong("nats-catch-up"),
        help: ArgumentHelp(
            "how long a JetStream stream keeps every export for a host that is away, which takes in what it missed when it comes back (90s, 30m, 1h, 7d; 0 turns it off; default: 1h).",
            valueName: "duration"
        )
    )
    var natsCatchUp: String?

    @Option(
        name: .customLong("nats-catch-up-bytes"),
        help: ArgumentHelp("the most bytes that stream keeps; the oldest go first (default: 268435456).", valueName: "bytes")
    )
    var natsCatchUpBytes: Int?

    @Option(
        name: .customLong("nats-tls-ca"),
        help: ArgumentHelp("PEM file of the certificate authorities to trust for the NATS servers' certificates (default: the system's).", valueName: "file")
    )
    var natsTlsCA: String?

    @Option(
        name: .customLong("nats-tls-cert"),
        help: ArgumentHelp("PEM file of this service's client certificate, for a NATS server that verifies its clients (with --nats-tls-key).", valueName: "file")
    )
    var natsTlsCert: String?

    @Option(
        name: .customLong("nats-tls-key"),
        help: ArgumentHelp("PEM file of the key of --nats-tls-cert; readable by its owner only.", valueName: "file")
    )
    var natsTlsKey: String?

    @Option(
        name: .customLong("nats-user"),
        help: ArgumentHelp("the NATS user to log in as (its password from --nats-password-file).", valueName: "name")
    )
    var natsUser: String?

    @Option(
        name: .customLong("nats-password-file"),
        help: ArgumentHelp("file holding the NATS user's password; readable by its owner only.", valueName: "file")
    )
    var natsPasswordFile: String?

    @Option(
        name: .customLong("nats-token-file"),
        help: ArgumentHelp("file holding a NATS token to log in with; readable by its owner only.", valueName: "file")
    )
    var natsTokenFile: String?

    @Option(
        name: .customLong("nats-nkey-file"),
        help: ArgumentHelp("file holding an NKey seed (SU…) to log in with; readable by its owner only.", valueName: "file")
    )
    var natsNkeyFile: String?

    @Option(
        name: .customLong("nats-credentials"),
        help: ArgumentHelp("a .creds file (user JWT and NKey seed, as nsc writes it) to log in with; readable by its owner only.", valueName: "file")
    )
    var natsCredentials: String?

    @Option(
        name: .customLong("host-name"),
        help: ArgumentHelp("this host's name in other hosts' deliveries (default: the hostname).", valueName: "name")
    )
    var hostName: String?

    var overrides: FleetSettings.Overrides {
        var overrides = FleetSettings.Overrides()
        overrides.servers = natsServers
        overrides.exports = natsExports
        overrides.imports = natsImports
        overrides.prefix = natsPrefix
        overrides.hostName = hostName
        overrides.outboxBytes = natsOutboxBytes
        overrides.streamReplicas = natsStreamReplicas
        overrides.security = BridgeSecurity.Options(
            tlsCA: natsTlsCA,
            tlsCert: natsTlsCert,
            tlsKey: natsTlsKey,
            user: natsUser,
            passwordFile: natsPasswordFile,
            tokenFile: natsTokenFile,
            nkeyFile: natsNkeyFile,
            credentials: natsCredentials
        )
        overrides.catchUp = natsCatchUp
        overrides.catchUpBytes = natsCatchUpBytes
        return overrides
    }

    func run() async throws {
        if let reloadPID {
            guard reloadPID > 0, kill(reloadPID, SIGHUP) == 0 else {
                StandardError.writeLine("notifyd-fleet: cannot ask process \(reloadPID) to reload: \(String(cString: strerror(errno)))")
                throw ExitCode(1)
            }
            return
        }
        guard let level = Logger.Level(rawValue: logLevel) else {
            throw ValidationError("--log-level \(logLevel): give trace, debug, info, notice, warning, error or critical")
        }
        let settings: FleetSettings
        do {
            settings = try FleetSettings.load(overrides: overrides, configurationFile: config)
        } catch {
            StandardError.writeLine("notifyd-fleet: \(error)")
            throw ExitCode(78)
        }
        if checkConfig {
            print("# \(settings.path)\n\(settings.bridge.summary)")
            return
        }
        let toJournal = JournalSocket.standardErrorIsJournal()
        LoggingSystem.bootstrap { _ in FleetLogHandler(level: level, toJournal: toJournal) }
        let logger = Logger(label: "notifyd-fleet")
        let socketPath = SocketPath.resolveForClient(explicit: socket)
        // systemd may give several directories, separated by colons: the first is this unit's.
        let stateDirectory = (stateDirectory ?? getenv("STATE_DIRECTORY").map { String(cString: $0) }?.split(separator: ":").first.map(String.init))
            .flatMap { $0.isEmpty ? nil : $0 }
        if let stateDirectory, mkdir(stateDirectory, 0o700) != 0, errno != EEXIST {
            // Found out now, not at the first write a minute in: without it a restart takes in again what it had.
            StandardError.writeLine("notifyd-fleet: --state-dir \(stateDirectory) cannot be made: \(String(cString: strerror(errno)))")
            throw ExitCode(78)
        }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let eventLoop = group.next()
        let signals = await UnixSignalsSequence(trapping: .sighup, .sigterm, .sigint)
        let bridge = try await eventLoop.submit {
            let link = DaemonLink(socketPath: socketPath, exportPatterns: settings.bridge.exports, eventLoop: eventLoop, logger: logger)
            let bridge = NATSBridge(settings: settings.bridge, link: link, eventLoop: eventLoop, logger: logger, stateDirectory: stateDirectory)
            bridge.start()
            return NIOLoopBound(bridge, eventLoop: eventLoop)
        }.get()
        logger.log(
            .started,
            .notice,
            "notifyd-fleet started as host \(settings.bridge.hostName): daemon \(socketPath), NATS \(settings.bridge.servers.map(\.description).joined(separator: " ")), positions \(stateDirectory ?? "in memory only (no --state-dir)")"
        )
        let status = ServiceNotifier()
        status.send("READY=1")
        let statusTimer = eventLoop.scheduleRepeatedTask(initialDelay: .seconds(2), delay: .seconds(2)) { _ in
            status.send("STATUS=\(bridge.value.statusText)")
        }
        for await signal in signals {
            if signal == .sighup {
                status.send("RELOADING=1")
                do {
                    let newer = try FleetSettings.load(overrides: overrides, configurationFile: config)
                    try await eventLoop.submit { bridge.value.reconfigure(newer.bridge) }.get()
                    logger.log(.reloaded, .notice, "configuration reloaded")
                } catch {
                    logger.log(.reloadFailed, .error, "configuration not reloaded, the previous one stays in force: \(error)")
                }
                status.send("READY=1")
                continue
            }
            break
        }
        statusTimer.cancel()
        status.send("STOPPING=1")
        let unsent = try await eventLoop.flatSubmit { bridge.value.stop(grace: .seconds(2)) }.get()
        if unsent > 0 {
            logger.log(.natsOutboxOverflow, .error, "\(unsent) messages for other hosts were not confirmed by NATS before stopping")
        }
        logger.log(.stopped, .notice, "notifyd-fleet stopped")
        try await group.shutdownGracefully()
    }
}
