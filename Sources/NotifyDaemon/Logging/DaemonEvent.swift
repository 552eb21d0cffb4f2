import Logging

/// The kinds of event notifyd logs, each with a stable journal `MESSAGE_ID`, so an administrator can find them
/// with `journalctl MESSAGE_ID=…` however the wording of the message changes.
enum DaemonEvent: String, Hashable, CaseIterable {
    case started = "a70c2dcbd61748cb8346970c7821b0a5"
    case stopping = "9c369642fcb04d62961d0a0fd9e9a65d"
    case stopped = "f08c2ccf8e1b400c8334262d4f8f94de"
    case reloaded = "9543775093d846bba6aafcef3c2bd42d"
    case reloadFailed = "1625d94f564d455ab3a3f744db871b7d"
    case staleSocketReplaced = "9979d9164ef84e39b4f7228cc94eb2cb"
    case subscriberDisconnected = "6dca6176b9214287b5ba2261a046a6f5"
    case messagesDropped = "5bf29b1c6aa4439fb5db50a6d4c6027d"
    case messageCleared = "de9f50bd8d0740a481d146722b8bdbac"
    case publishRefused = "d1ac439938a34eee8a3ee6267006cb0c"
    case stateLoaded = "2867fe51ed1743d5a511391fa758ce40"
    case stateProblem = "cbe95eda38ab43dc92c586228b50f1a3"
    case connectionError = "9e6d49f0b42843d49ed8175cf55b9314"
    case connectionOpened = "068f570dc2d14a01bc59b77eaf5dda52"
    case connectionClosed = "532de1876cbe4b8d84808f4f7c5a3a84"
    /// The daemon could not start: its configuration, socket or state directory cannot be used.
    case startFailed = "9b7ed27843ec43718181d1f5a9c2ac89"
    case openFilesLimited = "b85d8dfdf510426aa05b75006411127a"

    /// The metadata key the journal handler turns into `MESSAGE_ID`.
    static let metadataKey = "message_id"
}

extension Logger {
    /// Logs `event` with its `MESSAGE_ID` and `metadata`, which the journal stores as fields (`peer_uid` becomes
    /// `PEER_UID`).
    /// Like swift-log's own, the message and metadata are built only when `level` is logged.
    func log(
        _ event: DaemonEvent,
        _ level: Logger.Level,
        _ message: @autoclosure () -> Logger.Message,
        _ metadata: @autoclosure () -> Logger.Metadata = [:]
    ) {
        log(level: level, message(), metadata: metadata().merging([DaemonEvent.metadataKey: .string(event.rawValue)]) { $1 })
    }
}
