#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import NotifySystem

/// Unbuffered writes to stdout: each call reaches the pipe at once, so `notify subscribe … | grep` sees every
/// message as it comes, not when a buffer fills.
enum StandardOutput {
    /// - Returns: false when nobody reads the output any more (`| head -1` exited: EPIPE).
    /// - Throws: ``CommandFailure`` (74) when it cannot be written otherwise, such as on a full disk: what was meant
    ///   for it is lost, which must not pass for success.
    @discardableResult
    static func write(_ bytes: [UInt8]) throws -> Bool {
        guard let error = bytes.withUnsafeBytes({ POSIX.writeAll(1, $0) }) else { return true }
        if error == EPIPE { return false }
        throw CommandFailure(.ioError, "cannot write to standard output: \(String(cString: strerror(error)))")
    }

    @discardableResult
    static func write(_ text: String) throws -> Bool {
        try write(Array(text.utf8))
    }
}

/// Reads standard input.
enum StandardInput {
    /// Whether standard input is a terminal (a person would have to type the message).
    static var isTerminal: Bool { isatty(0) == 1 }

    /// Reads up to `capacity` bytes; an empty result means end of input.
    static func read(upTo capacity: Int = 65_536) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: capacity)
        while true {
            let count = buffer.withUnsafeMutableBytes { systemRead(0, $0.baseAddress!, capacity) }
            if count < 0 && errno == EINTR { continue }
            return Array(buffer.prefix(max(count, 0)))
        }
    }

    /// Reads everything until end of input, or until more than `limit` bytes came (then returns what it has, one
    /// byte over the limit, so the caller can refuse it without reading a huge input to the end).
    static func readAll(limit: Int) -> [UInt8] {
        var all: [UInt8] = []
        while all.count <= limit {
            let chunk = read()
            if chunk.isEmpty { break }
            all += chunk
        }
        return all
    }
}

#if canImport(Glibc)
private let systemRead = Glibc.read
#elseif canImport(Musl)
private let systemRead = Musl.read
#elseif canImport(Darwin)
private let systemRead = Darwin.read
#endif
