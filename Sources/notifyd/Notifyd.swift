public import ArgumentParser
public import Logging
import NIOCore
import NIOPosix
import NotifyBus
import NotifyBroker
import ServiceLifecycle
import UnixSignals

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

struct Notifyd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "notifyd",
        abstract: "The notifyd daemon: a notification center for one host, on a Unix socket.",
        discussion: """
            Any local process may publish to a named topic and subscribe to topics and patterns; the daemon keeps the \
            latest message of each topic, also across restarts, so a newcomer can ask for it. The protocol is \
            described in PROTOCOL.md; the `notify` command is its client.

            SOCKET: --socket, else $NOTIFYD_SOCKET, else /run/notifyd/notifyd.sock for root and \
            $XDG_RUNTIME_DIR/notifyd/notifyd.sock for other users (/run/user/UID when XDG_RUNTIME_DIR is unset, \
            /tmp/notifyd-UID when that does not exist either). Missing directories are created. A socket left by a \
            daemon that died is replaced; a live daemon's socket is never taken. Started by systemd with a socket \
            (notifyd.socket), it serves that one and never removes it.

            STATE: each topic's buffered message and sequence number are kept in --state-dir, else \
            $STATE_DIRECTORY (systemd's StateDirectory=), else /var/lib/notifyd for root and \
            $XDG_STATE_HOME/notifyd (~/.local/state/notifyd) for other users.

            CONFIGURATION: --config, else $CONFIGURATION_DIRECTORY/notifyd.conf under systemd, else \
            /etc/notifyd/notifyd.conf for root and $XDG_CONFIG_HOME/notifyd/notifyd.conf for other users. It holds \
            `key = value` lines with the options' names (log-level = debug, max-payload = 65536) and # comments. \
            Access rules go under [rules], one `NAME = allow|deny publish|read|all PATTERN WHO...` line each \
            (WHO: user:NAME|UID, group:NAME|GID, unit:NAME or everyone), tried in order before the built-in rules; \
            the first that applies decides (`notify explain TOPIC` shows which). Options given here win over the \
            file; an unknown key, a bad value or a bad rule is an error naming its line. SIGHUP reads the file again \
            and applies log-level, the limits and the rules; a file that cannot be used is reported and the running \
            configuration stays in force. `notifyd --check-config [PATH]` checks a file without starting.

            SYSTEMD: READY=1 once the socket listens and the state is loaded; STATUS= kept current; RELOADING=1 on \
            SIGHUP; STOPPING=1 on SIGTERM; WATCHDOG=1 when WatchdogSec= is set. `notifyd --reload` sends SIGHUP to the \
            daemon on the socket and waits until the reload is done, for ExecReload= (so that `systemctl reload` \
            returns once the new configuration is in force, and fails when the file cannot be used). Logs go to the \
            journal with fields (TOPIC, PEER_UID, PEER_PID, PEER_UNIT, MESSAGE_ID, ...) when stderr is connected to \
            it, else to stderr as lines.

            SEVERAL HOSTS: with --nats URL (repeatable: the servers of one NATS cluster), or servers = under \
            [nats] in the file, the daemon shares topics with the daemons of other hosts through NATS: local \
            publishes matching --nats-export, of topics user nobody may read here, go to the subject <prefix>.<topic> \
            with their provenance (every client of the NATS server reads them), and messages \
            of other hosts matching --nats-import are published here (as user nobody, for access rules and \
            limits), their deliveries naming the origin host (--host-name). $… and user.… topics never cross; \
            nothing is sent back or taken in twice. Retained messages are also kept in a JetStream stream, so a \
            host that starts later answers `notify latest` with \
            the fleet's latest; every export is kept for --nats-catch-up (1h by default) in another, which each host \
            reads through a durable consumer of its own, so a host that was away takes in what it missed, in order, \
            and is told (a DROP) of what was older than the stream keeps. A CLEAR crosses too. While NATS is unreachable, local traffic goes on and exports wait in a bounded \
            outbox (--nats-outbox-bytes); what does not fit is counted (notify stats) and logged. The [nats] keys: \
            servers, export, import, prefix, host-name, outbox-bytes, stream-replicas, catch-up, catch-up-bytes, and for TLS and logins tls-ca, \
            tls-cert, tls-key, user, password-file, token-file, nkey-file, credentials (secrets from files readable by \
            their owner only; a tls:// server, or one that requires it, is reached over TLS only); SIGHUP applies them. \
            See docs/federation.md (installed under /usr/share/doc/notifyd).

            SIGTERM or SIGINT stops the daemon gracefully: it stops accepting, sends every connection what it is \
            owed (at most 5 seconds each), saves its state, and removes the socket it created.

            Exit status: 0 after a graceful stop; 64 for bad options; 73 when the socket or the state directory \
            cannot be used (another daemon uses it, or the path is unusable); 78 for a configuration file that \
            cannot be used; 1 for any other failure.
            """,
        version: NotifydRelease.version
    )

    @Option(name: .long, help: ArgumentHelp("The socket to listen on.", valueName: "path"))
    var socket: String?

    @Flag(
        name: .long,
        help: ArgumentHelp(
            "Check a configuration file (PATH, else the one the daemon would read) with the options given, print what it sets, and exit: 0 when it can be used, 78 when not."
        )
    )
    var checkConfig = false

    @Argument(help: ArgumentHelp("With --check-config: the file to check.", valueName: "path"))
    var checkedFile: String?

    @Flag(
        name: .long,
        help: ArgumentHelp(
            "Ask the notifyd on --socket to read its configuration again, and wait until it has: exit 0 once the new configuration is in force, 78 if the daemon kept the old one because the file cannot be used, 69 if it cannot be reached, 1 if it did not finish within a minute. For ExecReload=."
        )
    )
    var reload = false

    @Option(name: .long, help: ArgumentHelp("The configuration file.", valueName: "path"))
    var config: String?

    @Option(name: .customLong("state-dir"), help: ArgumentHelp("Where buffered messages are kept.", valueName: "path"))
    var stateDirectory: String?

    @Option(name: .long, help: "The least important log level shown: trace, debug, info, notice, warning, error or critical (default: info).")
    var logLevel: Logger.Level?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "When buffered messages reach the disk: never (the kernel writes them out; they survive the daemon's death) or always (an fsync, on a thread of its own, before an acknowledgement leaves; they survive power loss). Default: never.",
            valueName: "policy"
        )
    )
    var sync: StateLog.SyncPolicy?

    @Option(name: .long, help: ArgumentHelp("The largest payload accepted, in bytes (default: 1048576).", valueName: "bytes"))
    var maxPayload: Int?

    @Option(name: .long, help: ArgumentHelp("The longest topic or pattern accepted, 1 to 255 bytes (default: 255).", valueName: "bytes"))
    var maxTopicLength: Int?

    @Option(name: .long, help: ArgumentHelp("The most subscriptions one connection may hold (default: 10000).", valueName: "count"))
    var maxSubscriptions: Int?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The most topics tracked; past it, topics without a buffered message are forgotten, oldest first, and remembered by name and number so a resume is told what it missed (default: 1000000).",
            valueName: "count"
        )
    )
    var maxTopics: Int?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The most payload bytes of buffered messages, over all topics; a retained publish past it is refused (default: 268435456).",
            valueName: "bytes"
        )
    )
    var maxRetainedBytes: Int?

    @Option(
        name: .customLong("max-retained-bytes-per-user"),
        help: ArgumentHelp(
            "The most payload bytes of buffered messages one uid may have published (default: 67108864, or a quarter of --max-retained-bytes if less).",
            valueName: "bytes"
        )
    )
    var maxRetainedBytesPerUser: Int?

    @Option(
        name: .customLong("max-subscriptions-per-user"),
        help: ArgumentHelp("The most subscriptions one uid may hold over its connections (default: 100000).", valueName: "count")
    )
    var maxSubscriptionsPerUser: Int?

    @Option(name: .long, help: ArgumentHelp("The most connections open at once (default: 16384).", valueName: "count"))
    var maxConnections: Int?

    @Option(
        name: .customLong("max-connections-per-user"),
        help: ArgumentHelp("The most connections one uid may have open at once (default: 4096, or a quarter of --max-connections if less).", valueName: "count")
    )
    var maxConnectionsPerUser: Int?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The most messages in the queue of a subscriber that does not keep up; past it, its overflow policy applies (default: 100000).",
            valueName: "count"
        )
    )
    var maxQueuedMessages: Int?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The most bytes waiting for a subscriber that does not keep up: half in its write buffer as sent, half in its queue (default: 67108864).",
            valueName: "bytes"
        )
    )
    var maxQueuedBytes: Int?

    @Option(
        name: .customLong("max-queued-bytes-per-user"),
        help: ArgumentHelp(
            "The most bytes queued for one uid's connections together; past it, their overflow policies apply (default: 268435456, or a quarter of --max-queued-bytes-total if less).",
            valueName: "bytes"
        )
    )
    var maxQueuedBytesPerUser: Int?

    @Option(
        name: .customLong("max-queued-bytes-total"),
        help: ArgumentHelp(
            "The most bytes queued for all connections together; past it, their overflow policies apply (default: 1073741824).",
            valueName: "bytes"
        )
    )
    var maxQueuedBytesTotal: Int?

    @Option(
        name: .customLong("max-retained-topics-per-user"),
        help: ArgumentHelp("The most topics whose buffered message one uid published (default: 100000, or a tenth of --max-topics if less).", valueName: "count")
    )
    var maxRetainedTopicsPerUser: Int?

    @Option(
        name: .customLong("max-unread-bytes-per-user"),
        help: ArgumentHelp(
            "The most bytes of unfinished requests one uid's connections may hold; past it, the connection is closed (default: 67108864, or a quarter of --max-unread-bytes-total if less).",
            valueName: "bytes"
        )
    )
    var maxUnreadBytesPerUser: Int?

    @Option(
        name: .customLong("max-unread-bytes-total"),
        help: ArgumentHelp(
            "The most bytes of unfinished requests all connections may hold (default: 268435456).",
            valueName: "bytes"
        )
    )
    var maxUnreadBytesTotal: Int?

    @Option(
        name: .customLong("history-messages"),
        help: ArgumentHelp("The most messages each topic keeps as its history, for subscribers that resume (default: 64; 0: none).", valueName: "count")
    )
    var historyMessages: Int?

    @Option(
        name: .customLong("history-bytes"),
        help: ArgumentHelp(
            "The most bytes of messages each topic keeps as its history, each counted as kept: its payload and its publisher's uid, pid and unit (default: 65536; 0: none).",
            valueName: "bytes"
        )
    )
    var historyBytes: Int?

    @Option(
        name: .customLong("fleet-user"),
        help: ArgumentHelp(
            "The user of the fleet service (notifyd-fleet), the only one whose connections may follow this host's messages out and bring other hosts' in: a name, a uid, or none (default: the user notifyd-fleet, if there is one).",
            valueName: "user"
        )
    )
    var fleetUser: String?

    @Option(
        name: .customLong("nats"),
        help: ArgumentHelp(
            "A NATS server to share topics with other hosts' daemons through (nats://HOST:PORT); repeat it for the servers of one cluster, tried in turn.",
            valueName: "url"
        )
    )
    var natsServers: [String] = []

    @Option(
        name: .customLong("nats-export"),
        help: ArgumentHelp(
            "With --nats: local topics sent to other hosts, of those user nobody may read here (repeatable; default: every topic but $… and user.…).",
            valueName: "pattern"
        )
    )
    var natsExports: [String] = []

    @Option(
        name: .customLong("nats-import"),
        help: ArgumentHelp("With --nats: other hosts' topics taken in (repeatable; default: every topic but $… and user.…).", valueName: "pattern")
    )
    var natsImports: [String] = []

    @Option(
        name: .customLong("nats-prefix"),
        help: ArgumentHelp("With --nats: the first tokens of the NATS subjects used, <prefix>.<topic> (default: notifyd).", valueName: "prefix")
    )
    var natsPrefix: String?

    @Option(
        name: .customLong("nats-outbox-bytes"),
        help: ArgumentHelp(
            "With --nats: the most bytes of messages waiting for NATS while it is unreachable, each uid an equal part; past it they are not sent, and counted (default: 16777216).",
            valueName: "bytes"
        )
    )
    var natsOutboxBytes: Int?

    @Option(
        name: .customLong("nats-stream-replicas"),
        help: ArgumentHelp(
            "With --nats: copies a NATS cluster keeps of the stream of latest messages, when this daemon makes it, 1 to 5 (default: 1; in a cluster, 3 survives the loss of a server).",
            valueName: "count"
        )
    )
    var natsStreamReplicas: Int?

    @Option(
        name: .customLong("nats-catch-up"),
        help: ArgumentHelp(
            "With --nats: how long a JetStream stream keeps every export for a host that is away, which takes in what it missed when it comes back (90s, 30m, 1h, 7d; 0 turns it off; default: 1h).",
            valueName: "duration"
        )
    )
    var natsCatchUp: String?

    @Option(
        name: .customLong("nats-catch-up-bytes"),
        help: ArgumentHelp("With --nats: the most bytes that stream keeps; the oldest go first (default: 268435456).", valueName: "bytes")
    )
    var natsCatchUpBytes: Int?

    @Option(
        name: .customLong("nats-tls-ca"),
        help: ArgumentHelp("With --nats: PEM file of the certificate authorities to trust for the NATS servers' certificates (default: the system's).", valueName: "file")
    )
    var natsTlsCA: String?

    @Option(
        name: .customLong("nats-tls-cert"),
        help: ArgumentHelp("With --nats: PEM file of this daemon's client certificate, for a NATS server that verifies its clients (with --nats-tls-key).", valueName: "file")
    )
    var natsTlsCert: String?

    @Option(
        name: .customLong("nats-tls-key"),
        help: ArgumentHelp("With --nats: PEM file of the key of --nats-tls-cert; readable by its owner only.", valueName: "file")
    )
    var natsTlsKey: String?

    @Option(
        name: .customLong("nats-user"),
        help: ArgumentHelp("With --nats: the NATS user to log in as (its password from --nats-password-file).", valueName: "name")
    )
    var natsUser: String?

    @Option(
        name: .customLong("nats-password-file"),
        help: ArgumentHelp("With --nats: file holding the NATS user's password; readable by its owner only.", valueName: "file")
    )
    var natsPasswordFile: String?

    @Option(
        name: .customLong("nats-token-file"),
        help: ArgumentHelp("With --nats: file holding a NATS token to log in with; readable by its owner only.", valueName: "file")
    )
    var natsTokenFile: String?

    @Option(
        name: .customLong("nats-nkey-file"),
        help: ArgumentHelp("With --nats: file holding an NKey seed (SU…) to log in with; readable by its owner only.", valueName: "file")
    )
    var natsNkeyFile: String?

    @Option(
        name: .customLong("nats-credentials"),
        help: ArgumentHelp("With --nats: a .creds file (user JWT and NKey seed, as nsc writes it) to log in with; readable by its owner only.", valueName: "file")
    )
    var natsCredentials: String?

    @Option(
        name: .customLong("host-name"),
        help: ArgumentHelp("With --nats: this host's name in other hosts' deliveries (default: the hostname).", valueName: "name")
    )
    var hostName: String?

    func validate() throws {
        if reload && checkConfig {
            throw ValidationError("--reload asks a running daemon to reload; --check-config checks a file: give one of them")
        }
        if checkedFile != nil && !checkConfig {
            throw ValidationError("notifyd takes no arguments besides options; to check a configuration file, use --check-config PATH")
        }
    }

}

extension Logger.Level: @retroactive ExpressibleByArgument {}
extension StateLog.SyncPolicy: ExpressibleByArgument {}
