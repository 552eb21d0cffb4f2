import Synchronization

/// The gateway's own counters, for `/metrics`: requests by status, streams opened, bytes streamed. Streams open now
/// are ``StreamLimits``'s count.
final class GatewayMetrics: Sendable {
    private struct State {
        var requestsByStatus: [Int: UInt64] = [:]
    }

    private let state = Mutex(State())
    private let streamsOpened = Atomic<UInt64>(0)
    private let streamBytes = Atomic<UInt64>(0)
    private let streamDrops = Atomic<UInt64>(0)

    /// Counts a response with `status`.
    func responded(_ status: Int) {
        state.withLock { $0.requestsByStatus[status, default: 0] += 1 }
    }

    func streamOpened() { streamsOpened.add(1, ordering: .relaxed) }

    func streamed(_ bytes: Int) { streamBytes.add(UInt64(bytes), ordering: .relaxed) }

    /// Counts messages a stream's queue dropped for a reader that stopped.
    func streamDropped(_ count: UInt64) { streamDrops.add(count, ordering: .relaxed) }

    /// Requests so far, by status, in the order of the codes.
    var requests: [(status: Int, count: UInt64)] {
        state.withLock { $0.requestsByStatus.sorted { $0.key < $1.key }.map { ($0.key, $0.value) } }
    }

    var opened: UInt64 { streamsOpened.load(ordering: .relaxed) }
    var bytes: UInt64 { streamBytes.load(ordering: .relaxed) }
    var drops: UInt64 { streamDrops.load(ordering: .relaxed) }
}
