/// The stable, machine-readable part of an `ERR` reply (see PROTOCOL.md, "Errors").
///
/// A struct rather than an enum so that a client keeps working when a newer server sends a code it does not know.
public struct ErrorCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    /// The frame breaks the syntax (missing argument, bad number, unknown option, line too long, …).
    public static let malformed = ErrorCode(rawValue: "malformed")
    /// The verb is not part of the protocol.
    public static let unknownOperation = ErrorCode(rawValue: "unknown-op")
    /// A topic or pattern breaks the naming rules.
    public static let invalidTopic = ErrorCode(rawValue: "invalid-topic")
    /// The declared payload is larger than the server's `max_payload`.
    public static let payloadTooLarge = ErrorCode(rawValue: "too-large")
    /// The client may not do this (for example publish to a reserved `$` topic).
    public static let notPermitted = ErrorCode(rawValue: "not-permitted")
    /// A limit of the server was reached.
    public static let limitReached = ErrorCode(rawValue: "limit")
    /// Nothing is buffered for the topic, or the connection has no such subscription.
    public static let notFound = ErrorCode(rawValue: "not-found")
    /// The server is shutting down.
    public static let unavailable = ErrorCode(rawValue: "unavailable")
    /// The server cannot write its state log (a full or failing disk): a retained publish is refused, and an
    /// acknowledgement that the log could not back is withdrawn.
    public static let storage = ErrorCode(rawValue: "storage")

    public var description: String { rawValue }
}
