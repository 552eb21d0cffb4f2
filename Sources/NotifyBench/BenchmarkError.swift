import NotifyBus
/// A benchmark that could not be carried out as configured, or a phase that failed on the way (a latency message
/// that never reached every subscriber). Failures to reach the daemon are ``NotifyClientError``s instead.
public struct BenchmarkError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong, for a person.
    public var message: String

    /// Creates an error.
    public init(_ message: String) {
        self.message = message
    }

    public var description: String { message }
}
