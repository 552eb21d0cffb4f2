public import ArgumentParser
public import Logging
import NIOCore
import NIOPosix
import NotifyProtocol
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

            SEVERAL HOSTS: the fleet service, notifyd-fleet, a client of this daemon, shares topics with other \
            hosts through NATS (its own unit, user and network). Only --fleet-user (fleet-user in the file; by \
            default the system user notifyd-fleet, if /etc/passwd lists it) may follow this host's publishes out and publish \
            other hosts' messages here; the daemon checks every claim of theirs, and `notify stats` shows the fleet's \
            counters. The [nats] section of this file is the fleet service's. See docs/federation.md.

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
            "The user of the fleet service (notifyd-fleet), the only one whose connections may follow this host's messages out and bring other hosts' in: a name, a uid, or none (default: the user notifyd-fleet, if /etc/passwd lists it).",
            valueName: "user"
        )
    )
    var fleetUser: String?

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
