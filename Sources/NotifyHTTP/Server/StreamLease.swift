import Synchronization

/// What a stream holds while it is open: its place under ``StreamLimits`` and its subscription on the hub's
/// connections. Let go of once, when the stream ends, or when its response is dropped without its body ever being
/// written (a client gone before its response left): nothing a stream holds outlives it.
final class StreamLease: Sendable {
    private let limits: StreamLimits
    private let address: String
    private let state = Mutex<(subscription: StreamHub.Subscription?, ended: Bool)>((nil, false))

    init(limits: StreamLimits, address: String) {
        self.limits = limits
        self.address = address
    }

    /// Holds `subscription` until the stream ends (ended already: at once let go of).
    func hold(_ subscription: StreamHub.Subscription) {
        let ended = state.withLock { state in
            if !state.ended { state.subscription = subscription }
            return state.ended
        }
        if ended { subscription.end() }
    }

    func end() {
        let subscription: StreamHub.Subscription?? = state.withLock { state in
            guard !state.ended else { return nil }
            state.ended = true
            defer { state.subscription = nil }
            return .some(state.subscription)
        }
        guard let subscription else { return }
        limits.release(address)
        subscription?.end()
    }

    deinit { end() }
}
