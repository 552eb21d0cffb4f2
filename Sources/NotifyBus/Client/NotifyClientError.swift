#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import NotifyProtocol

/// Why a ``NotifyClient`` call failed.
public struct NotifyClientError: Error, Sendable, CustomStringConvertible {
    /// The kind of failure, which decides what a caller can do about it.
    public enum Kind: Sendable, Hashable {
        /// No daemon answers at the socket path (missing, stale, or refusing connections).
        case unreachable
        /// The socket exists but this user may not connect to it.
        case notPermitted
        /// The daemon refused the request; ``NotifyClientError/refusal`` has its code and sentence.
        case refused
        /// The input was refused before sending: the payload is over the daemon's limit.
        case invalidInput
        /// The connection ended before the answer came.
        case connectionClosed
        /// The daemon sent something this client cannot read.
        case protocolViolation
    }

    /// The kind of failure.
    public let kind: Kind
    /// The daemon's error, when it refused the request.
    public let refusal: ProtocolError?
    /// What happened and what to do, for a person.
    public let message: String

    /// Creates an error.
    public init(_ kind: Kind, _ message: String, refusal: ProtocolError? = nil) {
        self.kind = kind
        self.message = message
        self.refusal = refusal
    }

    package static func refused(_ error: ProtocolError) -> NotifyClientError {
        NotifyClientError(.refused, error.message, refusal: error)
    }

    package static func payloadTooLarge(_ size: Int, limit: Int) -> NotifyClientError {
        NotifyClientError(.invalidInput, "the payload is \(size) bytes; the daemon accepts at most \(limit) bytes (max_payload)")
    }

    static func unexpected(_ frame: ServerFrame, for request: String) -> NotifyClientError {
        NotifyClientError(.protocolViolation, "the daemon answered \(request) with an unexpected frame: \(frame)")
    }

    /// The error for a failed `connect` to `path`, saying what to do about it.
    package static func connecting(to path: String, errno code: CInt?, detail: String? = nil) -> NotifyClientError {
        let reason = code.map { String(cString: strerror($0)) } ?? detail ?? "unknown error"
        // The system socket is systemd's system instance's to start; any other path is a user's own daemon.
        let service = path == SocketPath.system ? "sudo systemctl start notifyd.socket" : "systemctl --user start notifyd.socket"
        // A plain `notifyd` listens where a plain client looks; for any other path it must be told.
        let daemon = path == SocketPath.resolve() ? "notifyd" : "notifyd --socket \(path)"
        let start =
            "start it with `\(daemon)` (or `\(service)`), or point --socket or $\(SocketPath.environmentVariable) at its socket"
        switch code {
        case EACCES?, EPERM?:
            return NotifyClientError(.notPermitted, "not permitted to connect to \(path) (\(reason)); check the socket's owner and mode")
        case ENOENT?:
            return NotifyClientError(.unreachable, "no daemon socket at \(path); \(start)")
        case ECONNREFUSED?:
            return NotifyClientError(.unreachable, "no daemon is listening at \(path) (a stale socket?); \(start)")
        default:
            return NotifyClientError(.unreachable, "cannot connect to \(path): \(reason); \(start)")
        }
    }

    public var description: String { message }
}
