internal import DequeModule
import NIOCore
import Synchronization

/// The fire-and-forget publishes of one connection on their way out: ``NotifyClient/publish(_:to:retain:)-(ByteBuffer,_,_)``
/// encodes each into this buffer from the caller's task and returns; the connection's event loop writes what
/// gathered with one write, once per turn of the loop. A publish costs a lock and its encoding, not a hop to the
/// event loop and a system call.
///
/// The buffer is bounded: past ``limit`` bytes (those waiting here and those written to the channel but not yet to
/// the socket), a publish waits until the socket takes them; never an unbounded buffer, never a silent drop. The
/// frames carry no request id (the daemon's fast path), so what waits here when the connection is lost can go out
/// again on the next one, ahead of anything new: the client takes it over when it reconnects.
final class PublishOutbox: Sendable {
    private struct State {
        var pending: ByteBuffer
        /// Bytes given to the channel whose write has not completed yet.
        var inChannel = 0
        /// Whether the event loop has been asked to write what is pending.
        var drainScheduled = false
        /// Set once the connection is gone: nothing more is taken.
        var closed: NotifyClientError?
        /// Publishers waiting for room, in order, by a number of their own (to take one out when its task is cancelled).
        var waiting: Deque<(id: UInt64, continuation: CheckedContinuation<Void, any Error>)> = []
        var nextWaiter: UInt64 = 0
    }

    /// The most bytes held before a publish waits.
    let limit: Int
    private let state: Mutex<State>
    /// Asks the event loop to write what is pending (``ClientChannelHandler/drainOutbox()``).
    private let scheduleDrain: @Sendable () -> Void

    init(limit: Int, scheduleDrain: @escaping @Sendable () -> Void) {
        self.limit = max(limit, 1)
        self.scheduleDrain = scheduleDrain
        state = Mutex(State(pending: ByteBuffer()))
    }

    /// Encodes `payloads` as fire-and-forget publishes to `topic` after what is pending; waits first while the
    /// outbox is full.
    /// - Throws: the connection's error once it is gone (nothing was taken), or `CancellationError` when the task
    ///   was cancelled while waiting for room (nothing was taken, and the client stays usable).
    func append(_ payloads: some Collection<ByteBuffer>, to topic: Topic, retain: Bool) async throws {
        while true {
            let step = state.withLock { state -> AppendStep in
                if let closed = state.closed { return .closed(closed) }
                // A publish larger than the whole bound still goes, alone.
                guard state.pending.readableBytes + state.inChannel < limit else { return .full }
                state.pending.writePublishes(payloads, to: topic, retain: retain)
                guard !state.drainScheduled else { return .appended(schedule: false) }
                state.drainScheduled = true
                return .appended(schedule: true)
            }
            switch step {
            case .appended(let schedule):
                if schedule { scheduleDrain() }
                return
            case .closed(let error):
                throw error
            case .full:
                try await waitForRoom()
            }
        }
    }

    private enum AppendStep {
        case appended(schedule: Bool)
        case full
        case closed(NotifyClientError)
    }

    private func waitForRoom() async throws {
        let id = state.withLock { state in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let now = state.withLock { state -> Result<Void, any Error>? in
                    if let closed = state.closed { return .failure(closed) }
                    if Task.isCancelled { return .failure(CancellationError()) }
                    if state.pending.readableBytes + state.inChannel < limit { return .success(()) }
                    state.waiting.append((id, continuation))
                    return nil
                }
                if let now { continuation.resume(with: now) }
            }
        } onCancel: {
            let cancelled = state.withLock { state -> CheckedContinuation<Void, any Error>? in
                guard let index = state.waiting.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiting.remove(at: index).continuation
            }
            cancelled?.resume(throwing: CancellationError())
        }
    }

    /// Takes what is pending, for the event loop to write; it counts as in the channel until ``written(_:)``.
    func take() -> ByteBuffer? {
        state.withLock { state in
            state.drainScheduled = false
            guard state.pending.readableBytes > 0 else { return nil }
            let bytes = state.pending
            state.pending = ByteBuffer()
            state.pending.reserveCapacity(min(bytes.readableBytes, 64 << 10))
            state.inChannel += bytes.readableBytes
            return bytes
        }
    }

    /// Notes that `count` bytes taken earlier reached the socket (or failed to), and lets waiting publishers on.
    func written(_ count: Int) {
        let resumed = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
            state.inChannel -= count
            var resumed: [CheckedContinuation<Void, any Error>] = []
            while !state.waiting.isEmpty, state.pending.readableBytes + state.inChannel < limit {
                resumed.append(state.waiting.removeFirst().continuation)
            }
            return resumed
        }
        for continuation in resumed { continuation.resume() }
    }

    /// Closes the outbox with `error` (the connection is gone): waiting publishers get the error, and what was
    /// never given to the channel is returned, to go out on the next connection.
    func close(_ error: NotifyClientError) -> ByteBuffer? {
        let (left, waiting) = state.withLock { state -> (ByteBuffer?, [CheckedContinuation<Void, any Error>]) in
            guard state.closed == nil else { return (nil, []) }
            state.closed = error
            defer {
                state.pending = ByteBuffer()
                state.waiting = []
            }
            return (state.pending.readableBytes > 0 ? state.pending : nil, state.waiting.map(\.continuation))
        }
        for continuation in waiting { continuation.resume(throwing: error) }
        return left
    }

    /// Puts `bytes` (left over from a lost connection) ahead of anything appended since, on this new one.
    func prepend(_ bytes: ByteBuffer) {
        let schedule = state.withLock { state -> Bool in
            guard state.closed == nil else { return false }
            var joined = bytes
            joined.writeImmutableBuffer(state.pending)
            state.pending = joined
            defer { state.drainScheduled = true }
            return !state.drainScheduled
        }
        if schedule { scheduleDrain() }
    }

    /// What waits, what is in the channel, and how many publishers wait for room: for tests.
    var held: (pending: Int, inChannel: Int, waiting: Int) {
        state.withLock { ($0.pending.readableBytes, $0.inChannel, $0.waiting.count) }
    }
}
