#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A file that holds a secret (a NATS password, token, NKey seed, `.creds` or TLS key): read only when its owner
/// alone may read it, so a secret never sits where other users of the host can take it, and never on the command
/// line or in the journal.
enum SecretFile {
    /// The most a secret file may hold: a `.creds` file is about 1 KiB.
    static let largest = 64 << 10

    /// Checks that `path` is a regular file readable by its owner only.
    static func check(_ path: String, holding what: String) throws(BridgeSettingsError) {
        var status = stat()
        guard stat(path, &status) == 0 else {
            throw BridgeSettingsError("\(path) (the \(what)) cannot be read: \(String(cString: strerror(errno)))")
        }
        guard status.st_mode & S_IFMT == S_IFREG else {
            throw BridgeSettingsError("\(path) (the \(what)) is not a regular file")
        }
        let mode = status.st_mode & 0o777
        guard mode & 0o044 == 0 else {
            let octal = String(mode, radix: 8)
            throw BridgeSettingsError(
                "\(path) holds the \(what) but group or others may read it (mode \(octal)): a secret must be readable by its owner only (chmod 600 \(path))"
            )
        }
    }

    /// The text of `path`, checked as ``check(_:holding:)`` does, without the line breaks it ends with.
    static func read(_ path: String, holding what: String) throws(BridgeSettingsError) -> String {
        try check(path, holding: what)
        var bytes = try contents(of: path, holding: what)
        while let last = bytes.last, last == UInt8(ascii: "\n") || last == UInt8(ascii: "\r") { bytes.removeLast() }
        guard !bytes.isEmpty else { throw BridgeSettingsError("\(path) (the \(what)) is empty") }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The bytes of `path`, at most `limit` (a secret's ``largest``; a CA bundle may be larger).
    static func contents(of path: String, holding what: String = "file", atMost limit: Int = largest) throws(BridgeSettingsError) -> [UInt8] {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw BridgeSettingsError("\(path) (the \(what)) cannot be read: \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw BridgeSettingsError("\(path) (the \(what)) cannot be read: \(String(cString: strerror(errno)))")
            }
            if count == 0 { break }
            bytes += chunk[0..<count]
            guard bytes.count <= limit else {
                throw BridgeSettingsError("\(path) (the \(what)) is over \(limit) bytes")
            }
        }
        return bytes
    }
}
