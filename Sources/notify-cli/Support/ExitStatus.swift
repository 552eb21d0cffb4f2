import ArgumentParser
import NotifyBus
import NotifySystem

/// The exit statuses of `notify`, one meaning each, so shell scripts can tell what happened
/// (the numbers follow sysexits.h where one fits).
enum ExitStatus: Int32 {
    case success = 0
    /// The answer is no: `latest` found nothing buffered; `bench` saw messages lost or out of order.
    case checkFailed = 1
    /// Bad command line (argument parser errors exit with 64 too).
    case usage = 64
    /// Invalid input: a bad topic or pattern, a payload over the daemon's limit.
    case invalidInput = 65
    /// The daemon is not reachable, or went away.
    case unavailable = 69
    /// The daemon sent something this client does not understand (a bug somewhere).
    case software = 70
    /// The daemon refused for now: a limit was reached.
    case temporaryFailure = 75
    /// Standard output could not be written (not a reader that went away: that ends a command quietly).
    case ioError = 74
    /// Not permitted: the socket's permissions, or the daemon's policy.
    case notPermitted = 77
    /// The time given with --timeout ran out.
    case timeout = 124

    /// The table printed in `notify --help` and the README.
    static let help = """
        Exit status:
          0    success
          1    latest: nothing is buffered; bench: messages were lost or out of order
          64   usage error (bad options or arguments)
          65   invalid input: a bad topic or pattern, a payload over the limit
          69   the daemon is unreachable, or closed the connection
          70   the daemon answered something this notify does not understand, or notify failed itself
          74   standard output could not be written (a full disk, say)
          75   the daemon refused for now: one of its limits was reached
          77   not permitted: socket permissions, or the access policy (see explain)
          124  --timeout ran out
        """
}

/// A failure that ends the command: the sentence for stderr and the exit status.
struct CommandFailure: Error {
    let status: ExitStatus
    let message: String

    init(_ status: ExitStatus, _ message: String) {
        self.status = status
        self.message = message
    }

    /// The exit status and sentence for a client error.
    init(_ error: NotifyClientError) {
        message = error.message
        switch error.kind {
        case .unreachable, .connectionClosed: status = .unavailable
        case .notPermitted: status = .notPermitted
        case .invalidInput: status = .invalidInput
        case .protocolViolation: status = .software
        case .refused:
            switch error.refusal?.code {
            case .invalidTopic?, .payloadTooLarge?: status = .invalidInput
            case .notPermitted?: status = .notPermitted
            case .limitReached?, .storage?: status = .temporaryFailure
            case .notFound?: status = .checkFailed
            case .unavailable?: status = .unavailable
            default: status = .software
            }
        }
    }
}

/// Runs a command body, turning failures into a line on stderr and the matching exit status.
func runReportingFailures(_ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch {
        throw ExitCode(report(error))
    }
}

/// Runs a command body, turning failures into a line on stderr and the matching exit status.
func runReportingFailures(_ body: () throws -> Void) throws {
    do {
        try body()
    } catch {
        throw ExitCode(report(error))
    }
}

/// Prints a failure on stderr and returns its exit status.
func report(_ error: any Error) -> Int32 {
    let failure: CommandFailure
    switch error {
    case let known as CommandFailure: failure = known
    case let client as NotifyClientError: failure = CommandFailure(client)
    case let exit as ExitCode: return exit.rawValue
    // Not one of ours: still said, and not as 1, which means "nothing buffered" to `latest`.
    default: failure = CommandFailure(.software, "\(error)")
    }
    StandardError.writeLine("notify: \(failure.message)")
    return failure.status.rawValue
}

/// Validates a topic given on the command line.
func parseTopic(_ text: String) throws -> Topic {
    do {
        return try Topic(text)
    } catch {
        throw CommandFailure(.invalidInput, "invalid topic: \(error)")
    }
}

/// Validates a pattern given on the command line.
func parsePattern(_ text: String) throws -> TopicPattern {
    do {
        return try TopicPattern(text)
    } catch {
        throw CommandFailure(.invalidInput, "invalid pattern: \(error)")
    }
}
