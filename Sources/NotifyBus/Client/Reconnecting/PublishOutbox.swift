internal import DequeModule
import NIOCore
import Synchronization
import NotifyProtocol

/// The fire-and-forget publishes of one connection on their way out: ``NotifyClient/publish(_:to:retain:)-(ByteBuffer,_,_)``
/// encodes each into this buffer from the caller's task and returns; the connection's event loop writes what
/// gathered with one write, once per turn of the loop. A publish costs a lock and its encoding, not a hop to the
/// event loop and a system call.
///
/// Acknowledged publishes take the same way (``appendAcknowledged(_:to:retain:)``): many tasks publishing at once
/// share its writes, and each waits for its own reply only, which the connection matches by request id.
///
/// The buffer is bounded: past ``limit`` bytes (those waiting here and those written to the channel but not yet to
/// the socket), a publish waits until the socket takes them; never an unbounded buffer, never a silent drop. The
/// fire-and-forget frames carry no request id (the daemon's fast path), so what waits here when the connection is
/// lost can go out again on the next one, ahead of anything new: the client takes it over when it reconnects. An
/// acknowledged publish still waiting here then fails instead, and its caller publishes it again.
final class PublishOutbox: Sendable {
    /// An acknowledged publish in the outbox: who waits for its reply, and where its frame is in what is pending.
    struct Acknowledged {
        let id: UInt64
        let reply: CheckedContinuation<ServerFrame, any Error>
        /// Called on the event loop with the reply as it is read, before `reply` resumes the caller.
        let onReply: (@Sendable (ServerFrame) -> Void)?
        let frame: Range<Int>
    }

    private struct State {
        var pending: ByteBuffer
        /// The acknowledged publishes among the pending frames, in order.
        var acknowledged: [Acknowledged] = []
        /// Bytes given to the channel whose write has not completed yet.
        var inChannel = 0
        /// Whether the event loop has been asked to write what is pending.
        var drainScheduled = false
        /// Set once the connection is gone: nothing more is taken.
        var closed: NotifyClientError?
        /// Publishers waiting for room, in order, by a number of their own (to take one out when its task is cancelled).
        var waiting: Deque<(id: UInt64, continuation: CheckedContinuation<Void, any Error>)> = []
        var nextWaiter: UInt64 = 0
        /// Publishes taken since a publisher last gave its executor up (``yieldEvery``).
        var sinceYield = 0
    }

    /// How many publishes go in before a publisher gives its executor up once: a loop of publishes that never has to
    /// wait for room never suspends, and on a shared executor (the main actor, where top-level code and view models
    /// run) it would keep a subscription's consumer from its messages until the loop ends, and the daemon would drop
    /// them. A turn given up every 1,024 lets such a consumer take them in batches, at well under 1 % of a publish loop.
    static let yieldEvery = 1024

    /// The most bytes held before a publish waits.
    let limit: Int
    private let state: Mutex<State>
    /// Asks the event loop to write what is pending (``ClientChannelHandler/drainOutbox()``).
    private let scheduleDrain: @Sendable () -> Void
    /// The connection's request ids, drawn from here by the outbox and by the connection alike.
    private let nextID = Atomic<UInt64>(1)

    init(limit: Int, scheduleDrain: @escaping @Sendable () -> Void) {
        self.limit = max(limit, 1)
        self.scheduleDrain = scheduleDrain
        state = Mutex(State(pending: ByteBuffer()))
    }

    /// Encodes `payloads` as fire-and-forget publishes to `topic` after what is pending; waits first while the
    /// outbox is full.
    /// - Throws: the connection's error once it is gone (nothing was taken), or `CancellationError` when the task
    ///   was cancelled while waiting for room (nothing was taken, and the client stays usable).
    nonisolated(nonsending) func append(_ payloads: [ByteBuffer], to topic: Topic, retain: Bool) async throws {
        try await append(count: payloads.count) { $0.writePublishes(payloads, to: topic, retain: retain) }
    }

    /// The same, for one payload (no array to make).
    nonisolated(nonsending) func append(_ payload: CollectionOfOne<ByteBuffer>, to topic: Topic, retain: Bool) async throws {
        try await append(count: 1) { $0.writePublishes(payload, to: topic, retain: retain) }
    }

    /// Encodes `count` publishes with `write` once there is room.
    nonisolated(nonsending) private func append(count: Int, _ write: (inout ByteBuffer) -> Void) async throws {
        while true {
            let step = state.withLock { state -> AppendStep in
                if let closed = state.closed { return .closed(closed) }
                // A publish larger than the whole bound still goes, alone.
                guard state.pending.readableBytes + state.inChannel < limit else { return .full }
                write(&state.pending)
                state.sinceYield += count
                let yields = state.sinceYield >= PublishOutbox.yieldEvery
                if yields { state.sinceYield = 0 }
                guard !state.drainScheduled else { return .appended(schedule: false, yields: yields) }
                state.drainScheduled = true
                return .appended(schedule: true, yields: yields)
            }
            switch step {
            case .appended(let schedule, let yields):
                if schedule { scheduleDrain() }
                if yields { await Task.yield() }
                return
            case .closed(let error):
                throw error
            case .full:
                try await waitForRoom()
            }
        }
    }

    /// Encodes an acknowledged publish of `payload` to `topic` after what is pending (waiting first while the outbox
    /// is full), and waits for the daemon's reply to it: an `OK` with its sequence number, or an `ERR`.
    /// - Throws: the connection's error once it is gone before the reply came (the publish was not written, or its
    ///   reply will not come), or `CancellationError` when the task was cancelled while waiting for room.
    /// `onReply` is called on the event loop with the reply as it is read (nothing when the connection fails first),
    /// before the caller resumes on its own executor: for what must follow the connection's order (a center's hold).
    nonisolated(nonsending) func appendAcknowledged(
        _ payload: ByteBuffer,
        to topic: Topic,
        retain: Bool,
        onReply: (@Sendable (ServerFrame) -> Void)? = nil
    ) async throws -> ServerFrame {
        while true {
            let room = state.withLock { state -> AppendStep in
                if let closed = state.closed { return .closed(closed) }
                return state.pending.readableBytes + state.inChannel < limit ? .appended(schedule: false, yields: false) : .full
            }
            switch room {
            case .appended: break
            case .closed(let error): throw error
            case .full:
                try await waitForRoom()
                continue
            }
            break
        }
        return try await withCheckedThrowingContinuation { (reply: CheckedContinuation<ServerFrame, any Error>) in
            let step = state.withLock { state -> AppendStep in
                if let closed = state.closed { return .closed(closed) }
                let id = takeRequestID()
                let start = state.pending.writerIndex
                state.pending.writeRequest(Request(id: id, .publish(topic, payload: payload, PublishOptions(retain: retain, acknowledge: true))))
                state.acknowledged.append(Acknowledged(id: id, reply: reply, onReply: onReply, frame: start..<state.pending.writerIndex))
                guard !state.drainScheduled else { return .appended(schedule: false, yields: false) }
                state.drainScheduled = true
                return .appended(schedule: true, yields: false)
            }
            switch step {
            case .appended(let schedule, _): if schedule { scheduleDrain() }
            case .closed(let error): reply.resume(throwing: error)
            case .full: preconditionFailure("an acknowledged publish does not wait for room once encoding")
            }
        }
    }

    /// A request id not used on this connection yet.
    func takeRequestID() -> UInt64 {
        nextID.wrappingAdd(1, ordering: .relaxed).oldValue
    }

    private enum AppendStep {
        case appended(schedule: Bool, yields: Bool)
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

    /// Takes what is pending, for the event loop to write, and who waits for the replies to the acknowledged publishes
    /// among it; it counts as in the channel until ``written(_:)``.
    func take() -> (bytes: ByteBuffer, acknowledged: [Acknowledged])? {
        state.withLock { state in
            state.drainScheduled = false
            guard state.pending.readableBytes > 0 else { return nil }
            let bytes = state.pending
            let acknowledged = state.acknowledged
            state.pending = ByteBuffer()
            state.pending.reserveCapacity(min(bytes.readableBytes, 64 << 10))
            state.acknowledged = []
            state.inChannel += bytes.readableBytes
            return (bytes, acknowledged)
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

    /// Closes the outbox with `error` (the connection is gone): waiting publishers get the error, and the
    /// fire-and-forget publishes never given to the channel are returned, to go out on the next connection. The
    /// acknowledged ones among them fail with `error`, and are left out: their callers publish them again.
    func close(_ error: NotifyClientError) -> ByteBuffer? {
        let (left, waiting, acknowledged) = state.withLock { state in
            guard state.closed == nil else { return (ByteBuffer?.none, [CheckedContinuation<Void, any Error>](), [Acknowledged]()) }
            state.closed = error
            defer {
                state.pending = ByteBuffer()
                state.waiting = []
                state.acknowledged = []
            }
            var left = state.pending
            if !state.acknowledged.isEmpty {
                left = ByteBuffer()
                var from = state.pending.readerIndex
                for publish in state.acknowledged {
                    left.writeImmutableBuffer(state.pending.getSlice(at: from, length: publish.frame.lowerBound - from)!)
                    from = publish.frame.upperBound
                }
                left.writeImmutableBuffer(state.pending.getSlice(at: from, length: state.pending.writerIndex - from)!)
            }
            return (left.readableBytes > 0 ? left : nil, state.waiting.map(\.continuation), state.acknowledged)
        }
        for continuation in waiting { continuation.resume(throwing: error) }
        for publish in acknowledged { publish.reply.resume(throwing: error) }
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
