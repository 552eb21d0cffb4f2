import Foundation
import Synchronization

/// A child process whose output is collected and whose exit is an event to await (with a deadline).
final class ChildProcess: Sendable {
    let process: Process
    let standardOutput = OutputCollector()
    let standardError = OutputCollector()
    private let exit = ExitEvent()

    /// Starts `executable` with `arguments`; `input`, if given, is written to its standard input, which is then
    /// closed; without it, standard input is empty.
    init(_ executable: String, _ arguments: [String], input: [UInt8]? = nil, environment: [String: String]? = nil) throws {
        process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        process.standardOutput = standardOutput.pipe
        process.standardError = standardError.pipe
        let stdin = Pipe()
        process.standardInput = stdin
        let exit = self.exit
        process.terminationHandler = { process in exit.fire(process.terminationStatus) }
        try process.run()
        let writer = stdin.fileHandleForWriting
        if let input {
            // Written from another thread so a large input cannot block the test on a full pipe.
            Thread.detachNewThread {
                try? writer.write(contentsOf: input)
                try? writer.close()
            }
        } else {
            try? writer.close()
        }
    }

    var pid: Int32 { process.processIdentifier }

    /// Waits for the process to exit and returns its exit status (or, after a signal, the signal number).
    func exitStatus(timeout: Duration = .seconds(60)) async throws -> Int32 {
        try await withDeadline(timeout, waitingFor: "\(process.executableURL!.lastPathComponent) to exit") {
            await self.exit.wait()
        }
    }

    /// Sends `signal` to the process.
    func signal(_ signal: Int32) {
        if process.isRunning { kill(process.processIdentifier, signal) }
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }
}

/// A process's exit, which any number of tasks may await.
final class ExitEvent: Sendable {
    private let state = Mutex<(status: Int32?, waiters: [CheckedContinuation<Int32, Never>])>((nil, []))

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
    child.standardOutput.drain()
    child.standardError.drain()
    return CommandResult(status: status, stdout: child.standardOutput.bytes, stderr: child.standardError.text)
}

/// Starts `notify` with `arguments` in the background.
func startNotify(_ arguments: [String], socket socketPath: String, input: [UInt8]? = nil) throws -> ChildProcess {
    try ChildProcess(Binaries.notify, arguments, input: input, environment: notifyEnvironment(socketPath))
}

/// The environment for `notify`: the test's socket through $NOTIFYD_SOCKET, as a user would set it.
private func notifyEnvironment(_ socketPath: String) -> [String: String] {
    var environment = ProcessInfo.processInfo.environment
    environment["NOTIFYD_SOCKET"] = socketPath
    return environment
}
