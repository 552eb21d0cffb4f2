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
                if condition(self.text) { return }
                if self.isClosed { throw TestFailure("the output closed before \(what); it was:\n\(self.text)") }
            }
        }
    }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Runs `body`, failing with a clear message if it takes longer than `timeout`.
func withDeadline<T: Sendable>(
    _ timeout: Duration,
    waitingFor what: String,
    _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: timeout)
            return nil
        }
        guard let first = try await group.next(), let value = first else {
            group.cancelAll()
            throw TestFailure("timed out after \(timeout) waiting for \(what)")
        }
        group.cancelAll()
        return value
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
