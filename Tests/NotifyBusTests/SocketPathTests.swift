import Foundation
import NIOCore
import Testing

@testable import NotifyBus

@Suite("Socket path")
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
        descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        let bound = try SocketAddress(unixDomainSocketPath: path).withSockAddr { bind(descriptor, $0, socklen_t($1)) }
        guard bound == 0 else { throw CocoaError(.fileWriteUnknown) }
    }
    deinit { close(descriptor) }
}
