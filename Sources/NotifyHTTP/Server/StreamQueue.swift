import DequeModule
import NIOCore
import NotifyBus
import Synchronization

/// The events one stream holds between its subscription and its reader: at most ``limit`` bytes.
///
/// While the reader keeps taking events, a full queue holds the subscription back (``waitForRoom(for:)``): the daemon
/// queues the rest, as for any subscriber, and a reader that is slow through a burst loses nothing. A reader that has
/// taken nothing for ``stallAfter`` has stopped: then the subscription is read as fast as it delivers, the oldest
/// events past ``limit`` are dropped and counted, and the reader's next read starts with a `dropped` event that says
/// how many. So a stopped reader holds this much in the gateway, and nothing at the daemon, whose quotas for the
/// gateway's user every other stream shares.
final class StreamQueue: Sendable {
    private struct State {
        var events = Deque<(event: GatewayEvent, size: Int)>()
        var bytes = 0
        var dropped: DropNotice?
        var ended = false
        var reader: CheckedContinuation<Void, Never>?
        /// The producer waiting for room, and whether it was woken while it was not yet waiting.
        var producer: CheckedContinuation<Void, Never>?
        var producerWoken = false
        /// When the reader last took events (or the queue began).
        var lastTaken = ContinuousClock.now
    }

    /// The most bytes of events it holds (payloads and topics, and a fixed cost per event).
    let limit: Int
    /// How long a reader may take nothing, with events waiting, before it counts as stopped.
    let stallAfter: Duration
    private let state = Mutex(State())

    init(limit: Int, stallAfter: Duration = .seconds(2)) {
        self.limit = limit
        self.stallAfter = stallAfter
    }

    /// Returns once `bytes` more fit under ``limit`` (or the queue is empty, or ended), or once the reader has taken
    /// nothing for ``stallAfter``: the producer's wait, which holds the subscription back for a reader that moves.
    func waitForRoom(for bytes: Int) async {
        while true {
            let wait: Duration? = state.withLock { state in
                if state.ended || state.events.isEmpty || state.bytes + bytes <= limit { return nil }
                let idle = ContinuousClock.now - state.lastTaken
                return idle >= stallAfter ? nil : stallAfter - idle
            }
            guard let wait else { return }
            let timer = Task {
                // Cancelled once the wait ended another way: then it wakes nobody.
                do { try await Task.sleep(for: wait) } catch { return }
                self.wakeProducer()
            }
            await withCheckedContinuation { producer in
                let now = state.withLock { state in
                    if state.producerWoken || state.ended {
                        state.producerWoken = false
                        return true
                    }
                    state.producer = producer
                    return false
                }
                if now { producer.resume() }
            }
            timer.cancel()
        }
    }

    private func wakeProducer() {
        let producer: CheckedContinuation<Void, Never>? = state.withLock { state in
            guard let producer = state.producer else {
                state.producerWoken = true
                return nil
            }
            state.producer = nil
            return producer
        }
        producer?.resume()
    }

    /// Appends `event` (see ``push(contentsOf:)``).
    func push(_ event: GatewayEvent) {
        push(contentsOf: CollectionOfOne(event))
    }

    /// Appends `events` under one lock; for a reader that has stopped, drops the oldest past ``limit`` (always
    /// keeping the newest). For one that moves, the producer waited for room first (``waitForRoom(for:)``), and what
    /// its batch brings past the limit stays.
    func push(contentsOf events: some Collection<GatewayEvent>) {
        let reader: CheckedContinuation<Void, Never>? = state.withLock { state in
            guard !state.ended else { return nil }
            for event in events {
                let size = StreamQueue.size(of: event)
                state.events.append((event, size))
                state.bytes += size
            }
            let stopped = state.bytes > limit && ContinuousClock.now - state.lastTaken >= stallAfter
            while stopped, state.bytes > limit, state.events.count > 1 {
                let oldest = state.events.removeFirst()
                state.bytes -= oldest.size
                if let notice = oldest.event.dropNotice { state.dropped = StreamQueue.merge(state.dropped, notice) }
            }
            defer { state.reader = nil }
            return state.reader
        }
        reader?.resume()
    }

    /// Appends a `keepalive` if nothing waits: one is needed only while nothing else flows.
    func pushKeepalive(_ event: GatewayEvent) {
        let isIdle = state.withLock { $0.events.isEmpty && $0.dropped == nil }
        if isIdle { push(event) }
    }

    /// Ends the queue: the reader gets what is left, then nil; a producer waiting for room goes on.
    func finish() {
        let reader: CheckedContinuation<Void, Never>? = state.withLock { state in
            state.ended = true
            defer { state.reader = nil }
            return state.reader
        }
        reader?.resume()
        wakeProducer()
    }

    /// Waits for events, then takes those at hand up to about `batch` bytes (at least one), a `dropped` event first
    /// for what was dropped before them; nil once the queue ended and nothing is left. One reader at a time.
    func take(upTo batch: Int) async -> [GatewayEvent]? {
        while true {
            let taken: [GatewayEvent]?? = state.withLock { state in
                var taken: [GatewayEvent] = []
                if let dropped = state.dropped {
                    taken.append(.dropped(dropped, at: .now()))
                    state.dropped = nil
                }
                var bytes = 0
                while bytes < batch, let first = state.events.popFirst() {
                    bytes += first.size
                    state.bytes -= first.size
                    taken.append(first.event)
                }
                if !taken.isEmpty {
                    state.lastTaken = .now
                    return .some(taken)
                }
                return state.ended ? .some(nil) : nil
            }
            if let taken {
                wakeProducer()
                return taken
            }
            await withCheckedContinuation { reader in
                let ready = state.withLock { state in
                    guard state.events.isEmpty, state.dropped == nil, !state.ended else { return true }
                    // Waiting with nothing to take is not a stall.
                    state.lastTaken = .now
                    state.reader = reader
                    return false
                }
                if ready { reader.resume() }
            }
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
