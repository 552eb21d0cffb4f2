import Logging
import NIOCore
import NotifyProtocol

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Why the daemon cannot take its socket path; each says what to do about it.
struct SocketFileError: Error, CustomStringConvertible {
    let description: String
}

/// Claims the path the daemon listens on: creates its directory, makes sure no live daemon owns it, and removes a
/// stale socket left by a daemon that died.
///
/// Two daemons started at once must not both decide that a socket is stale and unlink each other's fresh one, so
/// the claim is made under an exclusive `flock` on `<path>.lock`, held until the process exits. The lock file stays
/// behind on purpose: unlinking a lock file that another process may have just opened breaks mutual exclusion.
struct SocketFile {
    let path: String
    private let lockDescriptor: CInt

    /// Claims `path` or throws why it cannot.
    init(claiming path: String, logger: Logger) throws {
        self.path = path
        try SocketFile.makeParentDirectory(of: path)
        lockDescriptor = try SocketFile.lock(path + ".lock")

        var info = stat()
        guard lstat(path, &info) == 0 else { return }  // nothing there: the usual case
        guard (info.st_mode & S_IFMT) == S_IFSOCK else {
            throw SocketFileError(description: "\(path) exists and is not a socket; remove it or choose another path with --socket")
        }
        if SocketFile.someoneListens(at: path) {
            throw SocketFileError(description: "another notifyd is already listening on \(path); stop it first, or choose another path with --socket")
        }
        guard unlink(path) == 0 || errno == ENOENT else {
            throw SocketFileError(description: "cannot remove the stale socket \(path): \(String(cString: strerror(errno)))")
        }
        logger.log(.staleSocketReplaced, .notice, "replaced a stale socket left by a daemon that is gone", ["socket": "\(path)"])
    }

    /// Sets the socket file's mode once it is bound: the system socket is open to every local user, a user's is
    /// their own (its directory is private too).
    func setMode(systemWide: Bool) {
        chmod(path, systemWide ? 0o666 : 0o600)
    }

    /// Removes the socket file on shutdown.
    func remove() {
        unlink(path)
    }

    private static func lock(_ lockPath: String) throws -> CInt {
        let descriptor = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw SocketFileError(description: "cannot open the lock file \(lockPath): \(String(cString: strerror(errno)))")
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            let reason = errno
            close(descriptor)
            if reason == EWOULDBLOCK {
                throw SocketFileError(description: "another notifyd is running on \(String(lockPath.dropLast(5))) (it holds \(lockPath)); stop it first, or choose another path with --socket")
            }
            throw SocketFileError(description: "cannot lock \(lockPath): \(String(cString: strerror(reason)))")
        }
        return descriptor
    }

    /// Whether connecting to `path` succeeds, meaning a live process listens there.
    private static func someoneListens(at path: String) -> Bool {
        let probe = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard probe >= 0 else { return false }
        defer { close(probe) }
        guard let address = try? SocketAddress(unixDomainSocketPath: path) else { return false }
        return address.withSockAddr { connect(probe, $0, socklen_t($1)) } == 0
    }

    /// Creates the directories leading to `path` that are missing: private (0700) for a user's daemon, readable by
    /// all (0755) for root's, whose socket everyone may use.
    private static func makeParentDirectory(of path: String) throws {
        guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return }
        let directory = String(path[..<slash])
        var components: [Substring] = []
        for component in directory.split(separator: "/") {
            components.append(component)
            let partial = (directory.hasPrefix("/") ? "/" : "") + components.joined(separator: "/")
            if mkdir(partial, getuid() == 0 ? 0o755 : 0o700) != 0 && errno != EEXIST {
                throw SocketFileError(description: "cannot create the directory \(partial) for the socket: \(String(cString: strerror(errno)))")
            }
        }
        var info = stat()
        guard stat(directory, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else {
            throw SocketFileError(description: "\(directory) is not a directory; choose another path with --socket")
        }
        if getuid() != 0 && info.st_uid != getuid() && directory.hasPrefix("/tmp/") {
            // A shared temporary directory made by someone else could be used to intercept a user's messages.
            throw SocketFileError(description: "\(directory) belongs to another user; remove it, or set XDG_RUNTIME_DIR or --socket")
        }
        if let problem = SocketPath.fallbackProblem(path) {
            throw SocketFileError(description: problem)
        }
    }
}
