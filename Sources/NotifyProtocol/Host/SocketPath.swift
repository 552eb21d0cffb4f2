#if canImport(Glibc)
public import Glibc
#elseif canImport(Musl)
public import Musl
#elseif canImport(Darwin)
public import Darwin
#endif

/// Where the daemon listens, decided the same way by `notifyd` and `notify` so that they meet without configuration.
public enum SocketPath {
    /// The environment variable that overrides the default (never `NOTIFY_SOCKET`, which belongs to systemd).
    public static let environmentVariable = "NOTIFYD_SOCKET"
    /// The system daemon's socket, used by root.
    public static let system = "/run/notifyd/notifyd.sock"

    /// The socket path: `explicit` if given, else `$NOTIFYD_SOCKET`, else the default for the user.
    ///
    /// The default is ``system`` for root and `<runtime dir>/notifyd/notifyd.sock` for anyone else, where the runtime
    /// dir is `$XDG_RUNTIME_DIR`, else `/run/user/<uid>` when it exists (so cron jobs and `su` shells, which lack
    /// the variable, find the daemon of the user's login session), else `/tmp/notifyd-<uid>`.
    public static func resolve(
        explicit: String? = nil,
        environment: (String) -> String? = { getenv($0).map { String(cString: $0) } },
        uid: UInt32? = nil
    ) -> String {
        if let explicit, !explicit.isEmpty { return explicit }
        let uid = uid ?? UInt32(getuid())
        if let fromEnvironment = environment(environmentVariable), !fromEnvironment.isEmpty { return fromEnvironment }
        if uid == 0 { return system }
        return runtimeDirectory(environment: environment, uid: uid) + "/notifyd/notifyd.sock"
    }

    /// The socket a client connects to: ``resolve(explicit:environment:uid:)``, except that a user without a daemon
    /// of their own (no socket at the per-user path) reaches the system daemon when it runs: the common case once
    /// the system service is installed.
    public static func resolveForClient(
        explicit: String? = nil,
        environment: (String) -> String? = { getenv($0).map { String(cString: $0) } },
        uid: UInt32? = nil
    ) -> String {
        resolveForClient(explicit: explicit, environment: environment, uid: uid, systemSocket: system)
    }

    static func resolveForClient(
        explicit: String?,
        environment: (String) -> String?,
        uid: UInt32?,
        systemSocket: String,
        perUserBase: String = "/run/user"
    ) -> String {
        if let explicit, !explicit.isEmpty { return explicit }
        if let fromEnvironment = environment(environmentVariable), !fromEnvironment.isEmpty { return fromEnvironment }
        let uid = uid ?? UInt32(getuid())
        if uid == 0 { return systemSocket }
        let own = runtimeDirectory(environment: environment, uid: uid, perUserBase: perUserBase) + "/notifyd/notifyd.sock"
        if !isSocket(own) && isSocket(systemSocket) { return systemSocket }
        return own
    }

    private static func isSocket(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFSOCK
    }

    /// The user's runtime directory as described for ``resolve(explicit:environment:uid:)``.
    public static func runtimeDirectory(environment: (String) -> String? = { getenv($0).map { String(cString: $0) } }, uid: UInt32) -> String {
        runtimeDirectory(environment: environment, uid: uid, perUserBase: "/run/user")
    }

    /// `perUserBase` is `/run/user` except in tests.
    static func runtimeDirectory(environment: (String) -> String?, uid: UInt32, perUserBase: String) -> String {
        if let runtime = environment("XDG_RUNTIME_DIR"), runtime.hasPrefix("/") { return runtime }
        let perUser = "\(perUserBase)/\(uid)"
        var info = stat()
        if stat(perUser, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR, info.st_uid == uid { return perUser }
        return fallbackDirectory(uid: uid)
    }

    /// Why `path` cannot be trusted, if it lies under the shared fallback directory `/tmp/notifyd-<uid>/` (`uid` is
    /// the caller's unless given) and that directory, or one below it on the way to the socket, is not a real
    /// directory owned by `uid` and writable by nobody else. Anyone may create `/tmp/notifyd-<uid>` before its user
    /// does; whoever controls it could put a socket of their own there and read what the user publishes, or swap a
    /// directory under a running daemon.
    /// - Returns: a sentence saying what is wrong and what to do, or nil when the path is fine or not under it.
    public static func fallbackProblem(_ path: String, uid: UInt32? = nil) -> String? {
        fallbackProblem(path, uid: uid ?? UInt32(getuid()), temporaryDirectory: "/tmp")
    }

    /// `temporaryDirectory` is `/tmp` except in tests.
    static func fallbackProblem(_ path: String, uid: UInt32, temporaryDirectory: String) -> String? {
        let base = fallbackDirectory(uid: uid, temporaryDirectory: temporaryDirectory)
        guard path.hasPrefix(base + "/") else { return nil }
        var directory = base
        let below = path.dropFirst(base.count + 1).split(separator: "/").dropLast()
        for component in [Substring("")] + below {
            if !component.isEmpty { directory += "/" + component }
            var info = stat()
            guard lstat(directory, &info) == 0 else { continue }  // not made yet: the daemon makes it private
            guard (info.st_mode & S_IFMT) == S_IFDIR, info.st_uid == uid, info.st_mode & 0o022 == 0 else {
                return "\(directory) is not a private directory of uid \(uid) (another user may have made it); remove it, or set XDG_RUNTIME_DIR or --socket"
            }
        }
        return nil
    }

    /// Why the daemon that answered at `path` cannot be trusted, if `path` lies under the shared fallback directory
    /// and the daemon (`peerUID`, from the kernel) runs as another user than the caller: the directory checks of
    /// ``fallbackProblem(_:uid:)`` happen before connecting, and someone could make the directory in between.
    public static func fallbackPeerProblem(_ path: String, peerUID: UInt32?) -> String? {
        guard isInFallback(path) else { return nil }
        let uid = UInt32(getuid())
        guard let peerUID else { return "cannot tell who serves \(path); set XDG_RUNTIME_DIR or --socket" }
        guard peerUID == uid else {
            return "the daemon at \(path) runs as uid \(peerUID), not as you (uid \(uid)); remove \(fallbackDirectory(uid: uid)), or set XDG_RUNTIME_DIR or --socket"
        }
        return nil
    }

    /// Whether `path` lies under the caller's shared fallback directory, where who serves it must be checked.
    public static func isInFallback(_ path: String) -> Bool {
        path.hasPrefix(fallbackDirectory(uid: UInt32(getuid())) + "/")
    }

    /// The runtime directory of last resort, in the shared `/tmp` (another `temporaryDirectory` in tests).
    static func fallbackDirectory(uid: UInt32, temporaryDirectory: String = "/tmp") -> String {
        "\(temporaryDirectory)/notifyd-\(uid)"
    }
}
