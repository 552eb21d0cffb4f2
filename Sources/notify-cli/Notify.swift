import ArgumentParser
import NIOCore
import NIOPosix
import NotifyBus

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

@main
struct Notify: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "notify",
        abstract: "Publish to notifyd, subscribe to it, and read the latest message of a topic.",
        discussion: """
            Topics are dot-separated names such as backup.nightly.done; subscription patterns may use * for one \
            token and a final > for one or more (backup.*.done, backup.>). The daemon keeps the latest message of \
            each topic unless it was sent with --no-retain.

            The socket is --socket, else $NOTIFYD_SOCKET, else /run/notifyd/notifyd.sock for root and \
            $XDG_RUNTIME_DIR/notifyd/notifyd.sock for other users (/run/user/UID when XDG_RUNTIME_DIR is unset, \
            else /tmp/notifyd-UID), \
            the same rule notifyd follows; a user who runs no daemon of their own reaches the system daemon at \
            /run/notifyd/notifyd.sock.

            \(ExitStatus.help)
            """,
        version: NotifydRelease.version,
        subcommands: [Send.self, Subscribe.self, Latest.self, History.self, Wait.self, Clear.self, Topics.self, Stats.self, Explain.self, Bench.self]
    )

    @OptionGroup var connection: ConnectionOptions

    static func main() async {
        // A reader that leaves (`notify topics | head -1`) ends a command quietly, with its exit status, rather than
        // by a signal: writes report EPIPE (as they do once SwiftNIO, which ignores SIGPIPE too, has started).
        signal(SIGPIPE, SIG_IGN)
        if let quick = QuickSend(arguments: CommandLine.arguments) {
            terminate(quick.run())
        }
        // One NIO thread is all a command-line client needs; spawning one per core would only cost start-up time.
        NIOSingletons.groupLoopCountSuggestion = 1
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            exit(withError: error)
        }
    }
}

/// Ends the process with `status` (ParsableCommand's own `exit(withError:)` shadows the C function).
private func terminate(_ status: Int32) -> Never {
    exit(status)
}

/// Where to reach the daemon; accepted before or after the subcommand name.
struct ConnectionOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "The daemon's socket (default: $NOTIFYD_SOCKET, else the per-user or system socket).",
            valueName: "path"
        )
    )
    var socket: String?
}

/// The socket chosen on the command line, wherever the option was given.
protocol ConnectingCommand {
    var parent: Notify { get }
    var connection: ConnectionOptions { get }
}

extension ConnectingCommand {
    /// The socket given on the command line, if any.
    var socketPath: String? { connection.socket ?? parent.connection.socket }

    /// An async client, for commands that listen. It does not reconnect: `subscribe` and `wait` do that with a
    /// ``ResumingSubscription``, and `--no-reconnect` means it.
    func connect() async throws -> NotifyClient {
        try await NotifyClient.connect(to: socketPath, reconnectWithin: nil)
    }

    /// A blocking connection, for one-shot commands: no event-loop threads to start.
    func openConnection() throws -> NotifyConnection {
        try NotifyConnection(to: socketPath)
    }
}
