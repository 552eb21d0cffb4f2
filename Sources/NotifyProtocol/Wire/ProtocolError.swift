/// An error reply: what the server refused, why, and which request it answers.
public struct ProtocolError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The stable code, for programs.
    public var code: ErrorCode
    /// The sentence, for people. It never contains a line break.
    public var message: String
    /// The id of the request this answers, if that request carried one.
    public var requestID: UInt64?
    /// Whether the server closes the connection after sending this error, because it lost track of where the
    /// next frame starts. Only the server's decoder sets it; it is not sent on the wire.
    public var closesConnection: Bool

    /// Creates an error reply.
    public init(_ code: ErrorCode, _ message: String, requestID: UInt64? = nil, closesConnection: Bool = false) {
        self.code = code
        self.message = message
        self.requestID = requestID
        self.closesConnection = closesConnection
    }

    public var description: String { "\(code): \(message)" }
}
