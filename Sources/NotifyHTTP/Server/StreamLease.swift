import NotifyBus
import Synchronization

/// What a stream holds while it is open: its place under ``StreamLimits`` and its connection to the daemon. Let go
/// of once, when the stream ends, or when its response is dropped without its body ever being written (a client
/// gone before its response left): nothing a stream holds outlives it.
final class StreamLease: Sendable {
    private let limits: StreamLimits
    private let address: String
    let client: NotifyClient
    private let ended = Atomic(false)

    init(limits: StreamLimits, address: String, client: NotifyClient) {
        self.limits = limits
        self.address = address
        self.client = client
    }

    func end() async {
        guard !ended.exchange(true, ordering: .acquiringAndReleasing) else { return }
        limits.release(address)
        await client.close()
    }

    deinit {
        guard !ended.load(ordering: .acquiring) else { return }
        limits.release(address)
        let client = client
        Task { await client.close() }
    }
}
