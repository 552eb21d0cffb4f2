#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
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
        environment: (String) -> String? = SocketPath.processEnvironment,
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
        environment: (String) -> String? = SocketPath.processEnvironment,
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
    public static func runtimeDirectory(environment: (String) -> String? = SocketPath.processEnvironment, uid: UInt32) -> String {
        runtimeDirectory(environment: environment, uid: uid, perUserBase: "/run/user")
    }

    /// `perUserBase` is `/run/user` except in tests.
    static func runtimeDirectory(environment: (String) -> String?, uid: UInt32, perUserBase: String) -> String {
        if let runtime = environment("XDG_RUNTIME_DIR"), runtime.hasPrefix("/") { return runtime }
        let perUser = "\(perUserBase)/\(uid)"
        var info = stat()
        if stat(perUser, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR, info.st_uid == uid { return perUser }
        return "/tmp/notifyd-\(uid)"
    }

    /// Reads the process environment.
    public static func processEnvironment(_ name: String) -> String? {
        guard let value = getenv(name) else { return nil }
        return String(cString: value)
    }
}
