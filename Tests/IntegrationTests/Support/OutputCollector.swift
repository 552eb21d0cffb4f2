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

    let pipe = Pipe()
    private let state = Mutex(State())

    init() {
        pipe.fileHandleForReading.readabilityHandler = { [weak self] handle in
            self?.readAvailable(from: handle)
        }
    }

    /// Reads under the lock, so that `drain` and this handler never append out of order.
    private func readAvailable(from handle: FileHandle) {
        let waiters = state.withLock { state -> [AsyncStream<Void>.Continuation] in
            guard !state.closed else { return [] }
            let data = handle.availableData
            if data.isEmpty {
                state.closed = true
                handle.readabilityHandler = nil
            } else {
                state.bytes += data
            }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.yield() }
    }

    /// Takes whatever is left in the pipe once the writer has exited, without waiting for end of file: another
    /// child started meanwhile may have inherited the pipe's write end (Foundation does not mark it close-on-exec),
    /// which would keep end of file from ever coming.
    func drain() {
        state.withLock { state in
            guard !state.closed else { return }
            let handle = pipe.fileHandleForReading
            handle.readabilityHandler = nil
            let descriptor = handle.fileDescriptor
            _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                if count <= 0 { break }
                state.bytes += buffer[..<count]
            }
            state.closed = true
        }
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
                if self.isClosed && !condition(self.text) { throw TestFailure("the output closed before \(what); it was:\n\(self.text)") }
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
