#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Unbuffered writes to stdout: each call reaches the pipe at once, so `notify subscribe … | grep` sees every
/// message as it comes, not when a buffer fills.
enum StandardOutput {
    static func write(_ bytes: [UInt8]) {
        writeAll(1, bytes)
    }

    static func write(_ text: String) {
        write(Array(text.utf8))
    }
}

enum StandardError {
    static func writeLine(_ text: String) {
        writeAll(2, Array((text + "\n").utf8))
    }
}

private func writeAll(_ descriptor: CInt, _ bytes: [UInt8]) {
    bytes.withUnsafeBytes { raw in
        var offset = 0
        while offset < raw.count {
            let written = systemWrite(descriptor, raw.baseAddress! + offset, raw.count - offset)
            if written < 0 {
                if errno == EINTR { continue }
                return
            }
            offset += written
        }
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
private let systemWrite = Glibc.write
private let systemRead = Glibc.read
#elseif canImport(Musl)
private let systemWrite = Musl.write
private let systemRead = Musl.read
#elseif canImport(Darwin)
private let systemWrite = Darwin.write
private let systemRead = Darwin.read
#endif
