import DequeModule
import NIOCore
import NotifyBus
import Synchronization

/// The events one stream holds between its subscription and its reader: at most ``limit`` bytes.
///
/// The stream's subscription shares its connection to the daemon with other streams' (see ``StreamHub``), so the
/// queue never holds it back: events come in as the daemon delivers them, and past ``limit`` the oldest are dropped
/// and counted, and the reader's next read starts with a `dropped` event that says how many. A reader that keeps up
/// loses nothing; one slower than the messages through a burst longer than the queue holds, or one that stopped,
/// loses the oldest and is told; the streams beside it lose nothing either way, and the daemon holds nothing for it.
final class StreamQueue: Sendable {
    fileprivate struct State {
        var events = Deque<(event: GatewayEvent, size: Int)>()
        var bytes = 0
        var dropped: DropNotice?
        var ended = false
        var reader: CheckedContinuation<Void, Never>?
        /// Called once when an event comes or the queue ends, after ``take(upTo:orWake:)`` found nothing.
        var waker: (@Sendable () -> Void)?
    }

    /// The most bytes of events it holds (payloads and topics, and a fixed cost per event).
    let limit: Int
    private let state = Mutex(State())

    init(limit: Int) {
        self.limit = limit
    }

    /// Appends `event`, then drops the oldest past ``limit`` (always keeping the newest), counted. The event is moved
    /// in: no copy of it retained and released on the way, which its reader's event loop releases again (the two
    /// cores contending for its counts).
    func push(_ event: consuming GatewayEvent) {
        var pending: GatewayEvent? = consume event
        let waiting = state.withLock { state -> State.Waiting in
            guard !state.ended, let event = pending.take() else { return State.Waiting() }
            let size = StreamQueue.size(of: event)
            state.events.append((event, size))
            state.bytes += size
            dropOldest(&state)
            return state.takeWaiting()
        }
        waiting.wake()
    }

    /// Drops the oldest past ``limit``, always keeping the newest, counted.
    private func dropOldest(_ state: inout State) {
        while state.bytes > limit, state.events.count > 1 {
            let oldest = state.events.removeFirst()
            state.bytes -= oldest.size
            if let notice = oldest.event.dropNotice { state.dropped = StreamQueue.merge(state.dropped, notice) }
        }
    }

    /// Appends a `keepalive` if nothing waits: one is needed only while nothing else flows.
    func pushKeepalive(_ event: GatewayEvent) {
        let isIdle = state.withLock { $0.events.isEmpty && $0.dropped == nil }
        if isIdle { push(event) }
    }

    /// Ends the queue: the reader gets what is left, then nil.
    func finish() {
        let waiting = state.withLock { state -> State.Waiting in
            state.ended = true
            return state.takeWaiting()
        }
        waiting.wake()
    }

    /// Waits for events, then takes those at hand up to about `batch` bytes (at least one), a `dropped` event first
    /// for what was dropped before them; nil once the queue ended and nothing is left. One reader at a time.
    func take(upTo batch: Int) async -> [GatewayEvent]? {
        while true {
            let taken: [GatewayEvent]?? = state.withLock { $0.take(upTo: batch) }
            if let taken { return taken }
            await withCheckedContinuation { reader in
                let ready = state.withLock { state in
                    guard state.events.isEmpty, state.dropped == nil, !state.ended else { return true }
                    state.reader = reader
                    return false
                }
                if ready { reader.resume() }
            }
        }
    }

    /// Takes what waits now, as ``take(upTo:)`` does, without waiting: when nothing waits, an empty array, and `wake`
    /// is called once when an event comes or the queue ends (on the pusher's thread: it should only schedule the
    /// next take). For a reader that runs on an event loop rather than in a task of its own.
    func take(upTo batch: Int, orWake wake: @escaping @Sendable () -> Void) -> [GatewayEvent]? {
        state.withLock { state in
            guard let taken = state.take(upTo: batch) else {
                state.waker = wake
                return []
            }
            return taken
        }
    }

    /// What waits now, a `dropped` event first for what was dropped before it, without waiting: for a poll and the
    /// page, which take what the daemon replayed.
    func takeAtHand() -> [GatewayEvent] {
        state.withLock { state in
            var taken: [GatewayEvent] = []
            if let dropped = state.dropped {
                taken.append(.dropped(dropped, at: .now()))
                state.dropped = nil
            }
            while let first = state.events.popFirst() {
                state.bytes -= first.size
                taken.append(first.event)
            }
            return taken
        }
    }

    /// Events and bytes held now.
    var held: (events: Int, bytes: Int) { state.withLock { ($0.events.count, $0.bytes) } }

    /// What an event costs while it waits: its payload and topic, and what holds them.
    static func size(of event: GatewayEvent) -> Int {
        switch event {
        case .message(let delivery): delivery.payload.readableBytes + delivery.topic.name.utf8.count + 96
        default: 96
        }
    }

    /// One notice for two runs of drops: of one topic, its numbers' span; of several, their count only.
    static func merge(_ earlier: DropNotice?, _ later: DropNotice) -> DropNotice {
        guard let earlier else { return later }
        let (count, overflow) = earlier.count.addingReportingOverflow(later.count)
        let total = overflow ? UInt64.max : count
        guard earlier.topic == later.topic, !earlier.isAboutManyTopics else {
            return DropNotice(topic: DropNotice.manyTopics, count: total, firstSequence: 0, lastSequence: 0)
        }
        return DropNotice(
            topic: earlier.topic,
            count: total,
            firstSequence: min(earlier.firstSequence, later.firstSequence),
            lastSequence: max(earlier.lastSequence, later.lastSequence)
        )
    }
}

extension StreamQueue.State {
    /// Who waits for the queue: its async reader, or an event loop's (``StreamQueue/take(upTo:orWake:)``).
    struct Waiting {
        var reader: CheckedContinuation<Void, Never>?
        var waker: (@Sendable () -> Void)?

        /// Wakes them, outside the lock.
        func wake() {
            reader?.resume()
            waker?()
        }
    }

    /// Who waits, let go of: each is woken once.
    fileprivate mutating func takeWaiting() -> Waiting {
        defer {
            reader = nil
            waker = nil
        }
        return Waiting(reader: reader, waker: waker)
    }

    /// Takes up to about `batch` bytes of events, a `dropped` event first: nil when nothing waits; `.some(nil)` once
    /// the queue ended and nothing is left.
    fileprivate mutating func take(upTo batch: Int) -> [GatewayEvent]?? {
        var taken: [GatewayEvent] = []
        if let dropped {
            taken.append(.dropped(dropped, at: .now()))
            self.dropped = nil
        }
        var size = 0
        while size < batch, let first = events.popFirst() {
            size += first.size
            bytes -= first.size
            taken.append(first.event)
        }
        if !taken.isEmpty { return .some(taken) }
        return ended ? .some(nil) : nil
    }
}

extension GatewayEvent {
    /// What dropping this event loses, as a notice: a message, or the messages a notice already counts.
    var dropNotice: DropNotice? {
        switch self {
        case .message(let delivery):
            DropNotice(topic: delivery.topic, count: 1, firstSequence: delivery.sequence, lastSequence: delivery.sequence)
        case .dropped(let notice, _):
            notice
        case .open, .keepalive:
            nil
        }
    }
}
