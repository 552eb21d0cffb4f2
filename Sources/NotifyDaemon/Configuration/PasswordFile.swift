import NotifySystem

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Users as `/etc/passwd` lists them, read without NSS.
///
/// Only for the default `fleet-user`, the package's `notifyd-fleet`, which the package's `systemd-sysusers` writes
/// into `/etc/passwd`: asking NSS for a user that is not there goes on to every other source `nsswitch.conf` names,
/// and loads each one's library into the daemon for good (libnss_systemd and its libraries: some 400 KiB of an idle
/// daemon's memory, on every host without a fleet). A name given in the settings is asked of NSS, as before.
enum PasswordFile {
    /// The file the package's user is written to.
    static let systemPath = "/etc/passwd"
    /// Read no further: a password file of a million users is some 60 MiB; a bigger one is not read at all.
    static let largestSize = 64 << 20

    /// The uid of `name` in the password file at `path`; nil when the file does not list it (or cannot be read).
    static func uid(of name: String, path: String = systemPath) -> UInt32? {
        guard let contents = read(path) else { return nil }
        return uid(of: name, in: contents)
    }

    /// The uid of `name` in `contents`, a password file's text: `name:password:uid:gid:…` per line. A line that is
    /// not of that shape, or whose uid is not a number that fits 32 bits, is passed over.
    static func uid(of name: String, in contents: [UInt8]) -> UInt32? {
        let wanted = Array(name.utf8)
        guard !wanted.isEmpty, !wanted.contains(UInt8(ascii: ":")), !wanted.contains(UInt8(ascii: "\n")) else { return nil }
        for line in contents.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true) {
            let fields = line.split(separator: UInt8(ascii: ":"), maxSplits: 3, omittingEmptySubsequences: false)
            guard fields.count == 4, fields[0].elementsEqual(wanted) else { continue }
            let digits = fields[2]
            guard !digits.isEmpty, digits.count <= 10, digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
                let uid = UInt32(String(decoding: digits, as: UTF8.self))
            else { continue }
            return uid
        }
        return nil
    }

    private static func read(_ path: String) -> [UInt8]? {
        let file = POSIX.open(path, O_RDONLY | O_CLOEXEC)
        guard file >= 0 else { return nil }
        defer { POSIX.close(file) }
        var contents: [UInt8] = []
        // Small: what the daemon's heap takes for it at start stays its for good.
        var chunk = [UInt8](repeating: 0, count: 4 << 10)
        while true {
            let count = chunk.withUnsafeMutableBytes { POSIX.read(file, $0.baseAddress!, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                return nil
            }
            if count == 0 { return contents }
            guard contents.count + count <= largestSize else { return nil }
            contents.append(contentsOf: chunk[..<count])
        }
    }
}
