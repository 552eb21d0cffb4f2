#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Why the state log cannot be used, or a write failed.
public struct StateLogError: Error, Sendable, CustomStringConvertible {
    public let description: String

    init(description: String) {
        self.description = description
    }

    static func system(_ what: String, _ code: CInt) -> StateLogError {
        StateLogError(description: "\(what): \(String(cString: strerror(code)))")
    }
}
