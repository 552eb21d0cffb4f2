import NotifyBus
import Synchronization

/// The keepalives of every open stream, from one task: at each interval, a `keepalive` goes to each stream that has
/// nothing else waiting. One task for all streams, where each stream had a task of its own asleep between its
/// keepalives: an idle stream should cost the gateway little more than its connection.
final class KeepaliveTicker: Sendable {
    private struct State {
        var streams: [ObjectIdentifier: (queue: StreamQueue, names: String)] = [:]
        var task: Task<Void, Never>?
        var stopped = false
    }

    let interval: Duration
    private let state = Mutex(State())

    init(interval: Duration) {
        self.interval = interval
    }

    /// Sends `queue`'s stream a keepalive at each tick from now on, until ``remove(_:)``.
    func add(_ queue: StreamQueue, names: String) {
        state.withLock { state in
            guard !state.stopped else { return }
            state.streams[ObjectIdentifier(queue)] = (queue, names)
            if state.task == nil {
                let interval = self.interval
                state.task = Task { [weak self] in
                    while true {
                        do { try await Task.sleep(for: interval) } catch { return }
                        guard let self else { return }
                        self.tick()
                    }
                }
            }
        }
    }

    func remove(_ queue: StreamQueue) {
        state.withLock { _ = $0.streams.removeValue(forKey: ObjectIdentifier(queue)) }
    }

    private func tick() {
        let streams = state.withLock { Array($0.streams.values) }
        let now = PublishTime.now()
        for stream in streams { stream.queue.pushKeepalive(.keepalive(topics: stream.names, at: now)) }
    }

    /// Ends the ticks: the gateway stops.
    func stop() {
        let task = state.withLock { state in
            state.stopped = true
            state.streams.removeAll()
            defer { state.task = nil }
            return state.task
        }
        task?.cancel()
    }
}
