package import Logging

/// The kinds of event the fleet service logs, each with a stable journal `MESSAGE_ID` (the NATS ones are those the
/// daemon logged before the fleet became its own service), so an administrator finds them with
/// `journalctl MESSAGE_ID=…` however the wording changes.
package enum FleetEvent: String, Hashable, CaseIterable, Sendable {
    case started = "8dfe1fb7b7ca442cbb46d47ab3f9c7ac"
    case stopped = "cdba46dd234b4365bc93ce9aef7fbc64"
    case reloaded = "d18f784170b544cfa7ccd5e68c061b8d"
    case reloadFailed = "f34af352cea74abcab2f12e45ea078e1"
    /// The link to the daemon is up: exports are followed.
    case daemonLinked = "11dc245d1c9a43e1ba75a3e5b921fcec"
    /// The link to the daemon is down or refused.
    case daemonLinkProblem = "c09a2050d40648d9bd2544755b13778e"
    /// Connected to a NATS server.
    case natsConnected = "ceec87cbef214a7983a054b94d916a5d"
    /// Lost the NATS server, or could not reach any.
    case natsDisconnected = "41c89a78e9dc4fa081aa82508b17ad31"
    /// Messages for NATS did not fit in the outbox and were not sent.
    case natsOutboxOverflow = "450ea7c2b1b4454388d75cf6d44f7b87"
    /// A NATS server refused the login (its credentials); local traffic goes on.
    case natsAuthFailed = "c4ebb8827d2c4515a973ad8fe7aed1d3"
    /// A message from NATS could not be taken in, or the server refused a stream.
    case natsProblem = "2f9a50d0079d4d76b6fa793f7d10d73c"

    /// The metadata key a journal handler turns into `MESSAGE_ID`.
    package static let metadataKey = "message_id"
}

extension Logger {
    /// Logs `event` with its `MESSAGE_ID` and `metadata`; the message and metadata are built only when `level` is
    /// logged.
    package func log(
        _ event: FleetEvent,
        _ level: Logger.Level,
        _ message: @autoclosure () -> Logger.Message,
        _ metadata: @autoclosure () -> Logger.Metadata = [:]
    ) {
        log(level: level, message(), metadata: metadata().merging([FleetEvent.metadataKey: .string(event.rawValue)]) { $1 })
    }
}
