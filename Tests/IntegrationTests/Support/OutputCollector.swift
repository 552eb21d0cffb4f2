import Foundation
import Synchronization

/// Collects what a child process writes to one pipe, and lets a test wait until it contains something, with a
/// deadline: an event to wait on, never a sleep.
final class OutputCollector: Sendable {
    private struct State {
        var bytes: [UInt8] = []
        var closed = false
        var waiters: [UInt64: AsyncStream<Void>.Continuation] = [:]
        var nextWaiter: UInt64 = 0
    }

    private let state = Mutex(State())

    /// Reads `descriptor` on a thread of its own until end of file, then closes it.
    func collect(from descriptor: Int32) {
        Thread.detachNewThread { [self] in
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                append(count > 0 ? Array(buffer[..<count]) : nil)
                if count <= 0 { break }
            }
            close(descriptor)
        }
    }

    /// Appends `bytes` that came another way than a pipe read here (what a ``SocketRelay`` passed on).
    func record(_ bytes: [UInt8]) {
        append(bytes)
    }

    /// Appends `bytes`, or marks the end of the output when nil.
    private func append(_ bytes: [UInt8]?) {
        let waiters = state.withLock { state in
            if let bytes { state.bytes += bytes } else { state.closed = true }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.yield() }
    }

    /// Everything received so far.
    var bytes: [UInt8] { state.withLock { $0.bytes } }
    var text: String { String(decoding: bytes, as: UTF8.self) }
    var lines: [String] { text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init).filter { !$0.isEmpty } }
    var isClosed: Bool { state.withLock { $0.closed } }

    /// Waits until `condition` holds for the text received, or throws after `timeout`.
    func wait(
        timeout: Duration = .seconds(30),
        _ what: String,
        until condition: @escaping @Sendable (String) -> Bool
    ) async throws {
        let (updates, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let id = state.withLock { state in
            state.nextWaiter += 1
            state.waiters[state.nextWaiter] = continuation
            return state.nextWaiter
        }
        defer { _ = state.withLock { $0.waiters.removeValue(forKey: id) } }
        continuation.yield()  // check what is there already
        try await withDeadline(timeout, waitingFor: what) {
            for await _ in updates {
                // Closed first, then the text: it may close between a look at the text and one at whether it is
                // closed, and nothing comes after the close, so the text read after it is the last word.
                let closed = self.isClosed
                if condition(self.text) { return }
                if closed { throw TestFailure("the output closed before \(what); it was:\n\(self.text)") }
            }
        }
    }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Runs `body`, failing with a clear message if it takes longer than `timeout`.
///
/// The deadline holds even for a body that ignores cancellation (awaiting a process's exit, say): the body runs in a
/// task of its own, which is cancelled and left behind, where a task group would wait for it to end.
func withDeadline<T: Sendable>(
    _ timeout: Duration,
    waitingFor what: String,
    _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    let outcome = FirstOutcome<T>()
    return try await withCheckedThrowingContinuation { continuation in
        outcome.install(continuation)
        let work = Task {
            do {
                outcome.settle(.success(try await body()))
            } catch {
                outcome.settle(.failure(error))
            }
        }
        let timer = Task {
            try await Task.sleep(for: timeout)
            if outcome.settle(.failure(TestFailure("timed out after \(timeout) waiting for \(what)"))) { work.cancel() }
        }
        outcome.onSettled { timer.cancel() }
    }
}

/// Resumes a continuation with the first of several outcomes; the others are ignored.
private final class FirstOutcome<T: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<T, any Error>?
        var settled = false
        var onSettled: (@Sendable () -> Void)?
    }

    private let state = Mutex(State())

    func install(_ continuation: CheckedContinuation<T, any Error>) {
        state.withLock { $0.continuation = continuation }
    }

    /// Runs `action` once an outcome is in (at once if it is already).
    func onSettled(_ action: @escaping @Sendable () -> Void) {
        let now = state.withLock { state -> Bool in
            if state.settled { return true }
            state.onSettled = action
            return false
        }
        if now { action() }
    }

    /// Resumes with `result` unless an outcome came first; returns whether this one did.
    @discardableResult
    func settle(_ result: Result<T, any Error>) -> Bool {
        let taken = state.withLock { state -> (CheckedContinuation<T, any Error>, (@Sendable () -> Void)?)? in
            guard !state.settled, let continuation = state.continuation else { return nil }
            state.settled = true
            defer { state.continuation = nil; state.onSettled = nil }
            return (continuation, state.onSettled)
        }
        guard let (continuation, action) = taken else { return false }
        continuation.resume(with: result)
        action?()
        return true
    }
}

/// A value shared between tasks of a test.
final class Shared<Value: Sendable>: Sendable {
    private let storage: Mutex<Value>
    init(_ value: Value) { storage = Mutex(value) }
    func withLock<Result>(_ body: (inout Value) -> Result) -> Result { storage.withLock { body(&$0) } }
    var value: Value { storage.withLock { $0 } }
}

/// Runs blocking work (a socket read with a timeout) on a thread of its own. Swift concurrency runs tests on as
/// many threads as there are cores (two here), and a test blocked in `recv` must not hold one of them.
func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
    }
}
