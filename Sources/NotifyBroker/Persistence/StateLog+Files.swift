import NIOCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import NotifyProtocol
import NotifySystem

/// The files behind the log: the state directory's lock, the log's header, a rewrite into a temporary file renamed
/// over the log, and the directory's sync after each rename.
extension StateLog {
    static func makeDirectory(_ directory: String) throws {
        var components: [Substring] = []
        for component in directory.split(separator: "/") {
            components.append(component)
            let partial = (directory.hasPrefix("/") ? "/" : "") + components.joined(separator: "/")
            if mkdir(partial, 0o700) != 0 && errno != EEXIST {
                throw StateLogError.system("cannot create the state directory \(partial)", errno)
            }
        }
    }

    static func readFile(_ path: String) throws -> ByteBuffer? {
        let file = POSIX.open(path, O_RDONLY | O_CLOEXEC)
        if file < 0 {
            if errno == ENOENT { return nil }
            throw StateLogError.system("cannot read \(path)", errno)
        }
        defer { POSIX.close(file) }
        var buffer = ByteBuffer()
        while true {
            var count = 0
            buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: 1 << 16) { space in
                count = POSIX.read(file, space.baseAddress!, space.count)
                return max(count, 0)
            }
            if count < 0 {
                if errno == EINTR { continue }
                throw StateLogError.system("cannot read \(path)", errno)
            }
            if count == 0 { return buffer }
        }
    }

    static func fileLength(_ path: String) throws -> Int {
        var info = stat()
        guard stat(path, &info) == 0 else { throw StateLogError.system("cannot stat \(path)", errno) }
        return Int(info.st_size)
    }

    /// Keeps a damaged log under a name no other copy has (a second link to it: the log stays in place until the
    /// recovered one replaces it), synced, and returns that name.
    static func keepAside(_ path: String) throws -> String {
        let stem = "\(path).damaged-\(PublishTime.now().microsecondsSinceEpoch / 1_000_000)"
        var aside = stem
        var attempt = 1
        while link(path, aside) != 0 {
            guard errno == EEXIST, attempt < 1_000 else { throw StateLogError.system("cannot keep the damaged \(path) aside", errno) }
            aside = "\(stem).\(attempt)"
            attempt += 1
        }
        try syncDirectory(String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)]))
        try probe?.passed(.keptAside)
        return aside
    }

    /// Syncs a directory, so that the names created and replaced in it survive a power loss.
    static func syncDirectory(_ directory: String) throws {
        let file = POSIX.open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard file >= 0 else { throw StateLogError.system("cannot open the directory \(directory) to sync it", errno) }
        defer { POSIX.close(file) }
        guard fsync(file) == 0 else { throw StateLogError.system("cannot sync the directory \(directory)", errno) }
        if let code = probe?.directorySyncError { throw StateLogError.system("cannot sync the directory \(directory)", code) }
    }
}
