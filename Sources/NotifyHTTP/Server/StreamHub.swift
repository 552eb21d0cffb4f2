import NotifyBus
import Synchronization

/// The gateway's connections to the daemon for its streams: a few, each carrying many streams' subscriptions, made on
/// first use and kept (the client library reconnects them, and resumes each subscription, when the daemon restarts).
///
/// A stream never holds its connection back: its events go straight into its own bounded ``StreamQueue``, and are
/// counted out of the connection's buffer as they arrive, so a reader that stops costs its queue's bound and drops
/// there (counted, and told to it), while the streams beside it on the connection lose nothing. What the daemon holds
/// for a stream is its subscription: a pattern already held on the connection costs it nothing more.
actor StreamHub {
    let socketPath: String
    /// How many connections the streams are spread over, the least loaded first.
    let connections: Int
    private var clients: [Task<NotifyClient, any Error>?]
    private var streams: [Int]

    init(socketPath: String, connections: Int = 4) {
        self.socketPath = socketPath
        self.connections = max(1, connections)
        clients = Array(repeating: nil, count: max(1, connections))
        streams = Array(repeating: 0, count: max(1, connections))
    }

    /// A stream's subscription on one of the hub's connections: ``end()`` lets go of it.
    final class Subscription: Sendable {
        private let hub: StreamHub
        private let slot: Int
        private let handle: SubscriptionHandle
        private let ended = Atomic(false)

        fileprivate init(hub: StreamHub, slot: Int, handle: SubscriptionHandle) {
            self.hub = hub
            self.slot = slot
            self.handle = handle
        }

        /// Ends the subscription (the daemon is told when no other stream of the connection holds its patterns).
        func end() {
            guard !ended.exchange(true, ordering: .acquiringAndReleasing) else { return }
            handle.end()
            let hub = self.hub, slot = self.slot
            Task { await hub.release(slot) }
        }

        deinit { end() }
    }

    /// Subscribes to `patterns` (from `since`) on the least loaded connection, handing each event to `sink` on the
    /// connection's event loop, at once; `finished` is told when the subscription ends by itself (the daemon gone for
    /// good). Returns once the daemon confirmed it: what it replays (`since`, the latest) has reached `sink` by then.
    func subscribe(
        to patterns: [TopicPattern],
        since: ResumePoint?,
        latestFirst: Bool,
        sink: @escaping @Sendable (SubscriptionEvent) -> Void,
        finished: @escaping @Sendable ((any Error)?) -> Void
    ) async throws -> Subscription {
        let slot = streams.indices.min { streams[$0] < streams[$1] }!
        streams[slot] += 1
        do {
            let client = try await client(at: slot)
            // Counted out as it comes: a stream's queue, not the connection, holds what its reader has not taken.
            let gauge = SubscriptionGauge(limits: .default)
            let handle = try await client.subscribe(
                to: patterns,
                latestFirst: latestFirst,
                since: since,
                gauge: gauge,
                sink: { event in
                    sink(event)
                    _ = gauge.take(event.bufferedSize)
                },
                finished: finished
            )
            return Subscription(hub: self, slot: slot, handle: handle)
        } catch {
            streams[slot] -= 1
            throw error
        }
    }

    /// The client of connection `slot`, connected now if it is not yet (callers at once share one attempt).
    private func client(at slot: Int) async throws -> NotifyClient {
        if let task = clients[slot] {
            do {
                return try await task.value
            } catch {
                // A failed attempt is not kept: the next stream tries again.
                if clients[slot] == task { clients[slot] = nil }
                throw error
            }
        }
        let socketPath = self.socketPath
        let task = Task { try await NotifyClient.connect(to: socketPath, reconnectWithin: .seconds(30)) }
        clients[slot] = task
        return try await client(at: slot)
    }

    fileprivate func release(_ slot: Int) {
        streams[slot] -= 1
    }

    /// Closes every connection.
    func close() async {
        let all = clients.compactMap { $0 }
        clients = Array(repeating: nil, count: connections)
        for task in all { await (try? task.value)?.close() }
    }
}
