import Foundation
import Synchronization

/// A child process whose output is collected and whose exit is an event to await (with a deadline).
///
/// Started with `posix_spawn`, not Foundation's `Process`: its pipes are close-on-exec, so no other child inherits
/// them and end of file always comes, and its exit is seen by `waitpid`, not by a descriptor that a program such as
/// `systemd-socket-activate` closes before it execs the daemon (which made `Process` wait forever).
final class ChildProcess: Sendable {
    private typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32

    let pid: pid_t
    let executable: String
    let standardOutput = OutputCollector()
    let standardError = OutputCollector()
    private let exit = ExitEvent()

    /// Starts `executable` with `arguments`; `input`, if given, is written to its standard input, which is then
    /// closed; without it, standard input is empty.
    init(_ executable: String, _ arguments: [String], input: [UInt8]? = nil, environment: [String: String]? = nil) throws {
        self.executable = executable
        // Pipes are made close-on-exec in two steps; holding this lock while making them and spawning means no
        // other child is spawned in between and inherits them.
        spawnLock.lock()
        defer { spawnLock.unlock() }
        // glibc 2.34 has `posix_spawn_file_actions_addclosefrom_np`, but its header hides it from Swift.
        let closeFrom = unsafeBitCast(dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np"), to: CloseFrom?.self)
        guard let posix_spawn_file_actions_addclosefrom_np = closeFrom else {
            throw TestFailure("posix_spawn_file_actions_addclosefrom_np is missing (glibc 2.34 or later is needed)")
        }
        let stdin = try Self.pipe()
        let stdout = try Self.pipe()
        let stderr = try Self.pipe()
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, stdin.read, 0)
        posix_spawn_file_actions_adddup2(&actions, stdout.write, 1)
        posix_spawn_file_actions_adddup2(&actions, stderr.write, 2)
        // Sockets and files the test process opened without close-on-exec (its own, a library's) must not live on
        // in the child: a connection a test closed would stay open there, and a peer would never see it end.
        _ = posix_spawn_file_actions_addclosefrom_np(&actions, 3)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // The child starts with default signal handling and nothing blocked, whatever the test runner set.
        var all = sigset_t()
        sigfillset(&all)
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))

        let environment = environment ?? ProcessInfo.processInfo.environment
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        var child: pid_t = 0
        let result = posix_spawn(&child, executable, &actions, &attributes, argv, envp)
        for descriptor in [stdin.read, stdout.write, stderr.write] { close(descriptor) }
        guard result == 0 else {
            for descriptor in [stdin.write, stdout.read, stderr.read] { close(descriptor) }
            throw TestFailure("cannot start \(executable): \(String(cString: strerror(result)))")
        }
        pid = child
        let spawned = child
        standardOutput.collect(from: stdout.read)
        standardError.collect(from: stderr.read)
        let exit = self.exit
        Thread.detachNewThread {
            var status: Int32 = 0
            while waitpid(spawned, &status, 0) < 0 && errno == EINTR {}
            // Exit code, or 128 + the signal, as a shell reports it.
            let code = status & 0x7F == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
            exit.fire(code)
        }
        let writer = stdin.write
        Thread.detachNewThread {
            if let input {
                input.withUnsafeBytes { bytes in
                    var offset = 0
                    while offset < bytes.count {
                        let written = write(writer, bytes.baseAddress! + offset, bytes.count - offset)
                        if written <= 0 { break }
                        offset += written
                    }
                }
            }
            close(writer)
        }
    }

    private static func pipe() throws -> (read: Int32, write: Int32) {
        var descriptors: [Int32] = [0, 0]
        guard Foundation.pipe(&descriptors) == 0 else { throw TestFailure("pipe failed: errno \(errno)") }
        for descriptor in descriptors { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
        return (descriptors[0], descriptors[1])
    }

    var isRunning: Bool { !exit.hasFired }

    /// Waits for the process to exit and returns its exit status (128 + the signal when a signal ended it).
    func exitStatus(timeout: Duration = .seconds(60)) async throws -> Int32 {
        try await withDeadline(timeout, waitingFor: "\((executable as NSString).lastPathComponent) to exit") {
            await self.exit.wait()
        }
    }

    /// Sends `signal` to the process.
    func signal(_ signal: Int32) {
        if isRunning { kill(pid, signal) }
    }

    deinit {
        if isRunning { kill(pid, SIGKILL) }
    }
}

private let spawnLock = NSLock()

/// A process's exit, which any number of tasks may await.
final class ExitEvent: Sendable {
    private let state = Mutex<(status: Int32?, waiters: [CheckedContinuation<Int32, Never>])>((nil, []))

    var hasFired: Bool { state.withLock { $0.status != nil } }

    func fire(_ status: Int32) {
        let waiters = state.withLock { state in
            state.status = status
            defer { state.waiters.removeAll() }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: status) }
    }

    func wait() async -> Int32 {
        await withCheckedContinuation { continuation in
            let status = state.withLock { state -> Int32? in
                if let status = state.status { return status }
                state.waiters.append(continuation)
                return nil
            }
            if let status { continuation.resume(returning: status) }
        }
    }
}

/// What a finished command printed and returned.
struct CommandResult {
    let status: Int32
    let stdout: [UInt8]
    let stderr: String
    var output: String { String(decoding: stdout, as: UTF8.self) }
}

/// Runs `notify` with `arguments` against `socketPath` and waits for it to finish.
func notify(
    _ arguments: [String],
    socket socketPath: String,
    input: [UInt8]? = nil,
    timeout: Duration = .seconds(60)
) async throws -> CommandResult {
    let child = try ChildProcess(Binaries.notify, arguments, input: input, environment: notifyEnvironment(socketPath))
    let status = try await child.exitStatus(timeout: timeout)
    try await child.standardOutput.wait("notify's output to end") { _ in child.standardOutput.isClosed }
    try await child.standardError.wait("notify's errors to end") { _ in child.standardError.isClosed }
    return CommandResult(status: status, stdout: child.standardOutput.bytes, stderr: child.standardError.text)
}

/// Starts `notify` with `arguments` in the background.
func startNotify(_ arguments: [String], socket socketPath: String, input: [UInt8]? = nil) throws -> ChildProcess {
    try ChildProcess(Binaries.notify, arguments, input: input, environment: notifyEnvironment(socketPath))
}

/// Starts bash with `script`, in which `"$0"` is `notify` (for pipes and redirections: `"$0" topics | head -1`),
/// with the same environment as ``startNotify(_:socket:input:)``.
func startNotifyInShell(_ script: String, socket socketPath: String) throws -> ChildProcess {
    try ChildProcess("/bin/bash", ["-c", "set -o pipefail; " + script, Binaries.notify], environment: notifyEnvironment(socketPath))
}

/// The environment for `notify`: the test's socket through $NOTIFYD_SOCKET, as a user would set it.
private func notifyEnvironment(_ socketPath: String) -> [String: String] {
    var environment = ProcessInfo.processInfo.environment
    environment["NOTIFYD_SOCKET"] = socketPath
    return environment
}
