import Foundation
import NIOCore
import Testing

@testable import NotifyBus
@testable import NotifyProtocol

@Suite("Socket path", .timeLimit(.minutes(3)))
struct SocketPathTests {
    static func environment(_ values: [String: String]) -> (String) -> String? { { values[$0] } }

    @Test("--socket wins, then $NOTIFYD_SOCKET, never systemd's $NOTIFY_SOCKET")
    func precedence() {
        let both = Self.environment(["NOTIFYD_SOCKET": "/env.sock", "NOTIFY_SOCKET": "/systemd.sock", "XDG_RUNTIME_DIR": "/run/user/7"])
        #expect(SocketPath.resolve(explicit: "/flag.sock", environment: both, uid: 7) == "/flag.sock")
        #expect(SocketPath.resolve(explicit: nil, environment: both, uid: 7) == "/env.sock")
        let systemdOnly = Self.environment(["NOTIFY_SOCKET": "/systemd.sock", "XDG_RUNTIME_DIR": "/run/user/7"])
        #expect(SocketPath.resolve(explicit: nil, environment: systemdOnly, uid: 7) == "/run/user/7/notifyd/notifyd.sock")
        #expect(SocketPath.resolve(explicit: "", environment: both, uid: 7) == "/env.sock", "an empty flag counts as none")
    }

    @Test("root uses the system socket; other users their runtime directory")
    func defaults() {
        let runtime = Self.environment(["XDG_RUNTIME_DIR": "/run/user/1000"])
        #expect(SocketPath.resolve(environment: runtime, uid: 0) == "/run/notifyd/notifyd.sock")
        #expect(SocketPath.resolve(environment: runtime, uid: 1000) == "/run/user/1000/notifyd/notifyd.sock")
    }

    @Test("without XDG_RUNTIME_DIR: /run/user/UID if it is the user's directory, else /tmp/notifyd-UID")
    func fallbacks() throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("socketpath-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: base) }
        let uid = UInt32(getuid())
        let none = Self.environment([:])
        #expect(SocketPath.runtimeDirectory(environment: none, uid: uid, perUserBase: base) == "/tmp/notifyd-\(uid)")
        try FileManager.default.createDirectory(atPath: "\(base)/\(uid)", withIntermediateDirectories: true)
        #expect(SocketPath.runtimeDirectory(environment: none, uid: uid, perUserBase: base) == "\(base)/\(uid)")
        try FileManager.default.createDirectory(atPath: "\(base)/\(uid + 1)", withIntermediateDirectories: true)
        #expect(
            SocketPath.runtimeDirectory(environment: none, uid: uid + 1, perUserBase: base) == "/tmp/notifyd-\(uid + 1)",
            "a directory owned by someone else is not taken for the user's"
        )
        let relative = Self.environment(["XDG_RUNTIME_DIR": "relative/dir"])
        #expect(SocketPath.runtimeDirectory(environment: relative, uid: uid, perUserBase: base) == "\(base)/\(uid)")
    }

    @Test("the shared /tmp fallback is trusted only while each directory on the way is the user's alone")
    func fallbackMustBePrivate() throws {
        let temporary = FileManager.default.temporaryDirectory.appendingPathComponent("fallback-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: temporary) }
        let uid = UInt32(getuid())
        let base = "\(temporary)/notifyd-\(uid)"
        let socket = base + "/notifyd/notifyd.sock"
        func problem(_ path: String = socket, uid: UInt32 = uid) -> String? {
            SocketPath.fallbackProblem(path, uid: uid, temporaryDirectory: temporary)
        }
        try FileManager.default.createDirectory(atPath: temporary, withIntermediateDirectories: true)
        #expect(problem() == nil, "nothing made yet: the daemon will make it private")

        try FileManager.default.createDirectory(atPath: base + "/notifyd", withIntermediateDirectories: true)
        chmod(base, 0o700)
        chmod(base + "/notifyd", 0o700)
        #expect(problem() == nil)

        chmod(base, 0o777)
        #expect(problem()?.contains("\(base) is not a private directory of uid \(uid)") == true, "writable by others")
        chmod(base, 0o700)
        chmod(base + "/notifyd", 0o770)
        #expect(problem()?.contains("\(base)/notifyd is not a private directory") == true, "writable by the group")
        chmod(base + "/notifyd", 0o700)
        #expect(problem(uid: uid + 1) == nil, "another uid's fallback is a different path")
        let stranger = "\(temporary)/notifyd-\(uid + 1)"
        try FileManager.default.createDirectory(atPath: stranger + "/notifyd", withIntermediateDirectories: true)
        chmod(stranger, 0o700)
        #expect(problem(stranger + "/notifyd/notifyd.sock", uid: uid + 1) != nil, "owned by someone else")

        try FileManager.default.removeItem(atPath: base + "/notifyd")
        try FileManager.default.createSymbolicLink(atPath: base + "/notifyd", withDestinationPath: temporary)
        #expect(problem() != nil, "a symbolic link is not a directory of one's own")
        #expect(problem("/elsewhere/notifyd.sock") == nil, "paths outside the fallback are not judged")
    }

    @Test("a daemon answering in the /tmp fallback must run as the caller: someone may have made the directory since")
    func fallbackPeerMustBeTheCaller() {
        let uid = UInt32(getuid())
        let path = "/tmp/notifyd-\(uid)/notifyd/notifyd.sock"
        #expect(SocketPath.fallbackPeerProblem(path, peerUID: uid) == nil)
        let stranger = SocketPath.fallbackPeerProblem(path, peerUID: uid + 1)
        #expect(stranger?.contains("runs as uid \(uid + 1), not as you (uid \(uid))") == true)
        #expect(SocketPath.fallbackPeerProblem(path, peerUID: nil) != nil, "unknown is not trusted")
        #expect(SocketPath.fallbackPeerProblem("/run/notifyd/notifyd.sock", peerUID: uid + 1) == nil, "only the fallback")
        #expect(SocketPath.fallbackPeerProblem("/tmp/notifyd-\(uid + 1)/x.sock", peerUID: uid + 1) == nil, "another uid's")
    }

    @Test("an unreachable daemon's error names the path and how to start the daemon that belongs there")
    func unreachableHints() {
        let system = NotifyClientError.connecting(to: SocketPath.system, errno: ENOENT)
        #expect(system.kind == .unreachable)
        #expect(system.message.contains("no daemon socket at /run/notifyd/notifyd.sock"))
        #expect(system.message.contains("sudo systemctl start notifyd.socket"))
        let own = NotifyClientError.connecting(to: "/run/user/1000/notifyd/notifyd.sock", errno: ECONNREFUSED)
        #expect(own.message.contains("a stale socket?") && own.message.contains("systemctl --user start notifyd.socket"))
        let denied = NotifyClientError.connecting(to: SocketPath.system, errno: EACCES)
        #expect(denied.kind == .notPermitted && denied.message.contains("owner and mode"))
    }

    @Test("a client without a daemon of its own reaches the system daemon")
    func clientFallsBackToSystemDaemon() throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("clientpath-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: base) }
        try FileManager.default.createDirectory(atPath: base + "/user/notifyd", withIntermediateDirectories: true)
        let system = base + "/system.sock"
        let own = base + "/user/notifyd/notifyd.sock"
        let environment = Self.environment(["XDG_RUNTIME_DIR": base + "/user"])
        func resolve() -> String {
            SocketPath.resolveForClient(explicit: nil, environment: environment, uid: 1000, systemSocket: system)
        }
        #expect(resolve() == own, "neither runs: the user's own path, for the error message")
        let systemListener = try UnixListener(path: system)
        #expect(resolve() == system, "only the system daemon runs")
        let ownListener = try UnixListener(path: own)
        #expect(resolve() == own, "the user's own daemon wins")
        #expect(SocketPath.resolveForClient(explicit: nil, environment: environment, uid: 0, systemSocket: system) == system)
        _ = (systemListener, ownListener)
    }
}

/// A bound Unix socket file, for tests that need one to exist.
final class UnixListener {
    let descriptor: Int32
    init(path: String) throws {
        descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        let bound = try SocketAddress(unixDomainSocketPath: path).withSockAddr { bind(descriptor, $0, socklen_t($1)) }
        guard bound == 0 else { throw CocoaError(.fileWriteUnknown) }
    }
    deinit { close(descriptor) }
}
