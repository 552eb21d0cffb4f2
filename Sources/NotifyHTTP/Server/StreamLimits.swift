import HTTPTypes
import Synchronization

/// The bound on open streams, in total and per client address: each holds a connection to the daemon (counted
/// against the gateway user's limits there), so one client must not take them all.
final class StreamLimits: Sendable {
    let total: Int
    let perClient: Int
    private let open = Mutex<(total: Int, byClient: [String: Int])>((0, [:]))

    init(total: Int, perClient: Int) {
        self.total = total
        self.perClient = perClient
    }

    /// Counts a stream of `client`'s, or refuses it with 429 past a bound; ``release(_:)`` when it ends.
    func acquire(_ client: String) throws(GatewayError) {
        let refusal: GatewayError? = open.withLock { open in
            if open.total >= total {
                return GatewayError(.tooManyRequests, "the gateway has \(total) streams open, its limit (--max-streams); try again later")
            }
            if open.byClient[client, default: 0] >= perClient {
                return GatewayError(.tooManyRequests, "\(client) has \(perClient) streams open, the limit per address (--max-streams-per-address)")
            }
            open.total += 1
            open.byClient[client, default: 0] += 1
            return nil
        }
        if let refusal { throw refusal }
    }

    func release(_ client: String) {
        open.withLock { open in
            open.total -= 1
            let left = open.byClient[client, default: 1] - 1
            open.byClient[client] = left > 0 ? left : nil
        }
    }

    /// Streams open now, in total.
    var count: Int { open.withLock { $0.total } }
}
