import HTTPTypes
import NotifyBus
import Synchronization

/// What each client range has retained through the gateway: the topics whose buffered message it published last, and
/// their bytes. The daemon counts every retained message of the gateway against one user, the gateway's; without a
/// share per client, one client that retains many or large messages would leave every other client a 429.
///
/// The ledger knows only what went through this gateway: a topic that was cleared, forgotten or retained again by
/// another publisher still counts until the gateway looks. It looks when a range reaches its share
/// (``candidates(of:)``, then ``forget(_:of:sequence:)`` for each whose buffered message is no longer the one the
/// range published), so a range is refused only for what the daemon still holds of it. It holds at most
/// ``perClient`` topics per range and ``total`` in all.
final class RetainedShares: Sendable {
    /// The most topics and bytes one range may hold retained through the gateway.
    let perClient: (topics: Int, bytes: Int)
    /// The most topics the ledger holds over all ranges.
    let total: Int

    private struct State {
        /// topic → the range that retained its buffered message last, its size, and its number once acknowledged.
        var owners: [String: (client: String, bytes: Int, sequence: UInt64?)] = [:]
        /// range → what it holds: topics and bytes.
        var held: [String: (topics: Int, bytes: Int)] = [:]
    }

    private let state = Mutex(State())

    init(perClient: (topics: Int, bytes: Int), total: Int) {
        self.perClient = perClient
        self.total = total
    }

    /// Counts `bytes` retained on `topic` by `client`, or refuses it with 429 past the client's share.
    /// - Returns: what the topic held before (for ``restore(_:_:)`` if the publish fails).
    func take(_ topic: Topic, bytes: Int, by client: String) throws(GatewayError) -> (client: String, bytes: Int)? {
        let outcome: Result<(client: String, bytes: Int)?, GatewayError> = state.withLock { state in
            let previous = state.owners[topic.name]
            var mine = state.held[client, default: (0, 0)]
            if previous?.client == client {
                mine.bytes -= previous!.bytes
            } else {
                mine.topics += 1
            }
            mine.bytes += bytes
            if mine.topics > perClient.topics || mine.bytes > perClient.bytes {
                return .failure(GatewayError(
                    .tooManyRequests,
                    "\(client) holds \(mine.topics - (previous?.client == client ? 0 : 1)) retained topics of \(state.held[client]?.bytes ?? 0) bytes through this gateway, its share (--max-retained-topics-per-address \(perClient.topics), --max-retained-bytes-per-address \(perClient.bytes)); publish with ?retain=no, or retain fewer"
                ))
            }
            if previous == nil, state.owners.count >= total {
                return .failure(GatewayError(.tooManyRequests, "the gateway holds \(total) retained topics for its clients, its limit; publish with ?retain=no"))
            }
            if let previous, previous.client != client { Self.remove(previous, from: &state) }
            state.owners[topic.name] = (client, bytes, nil)
            state.held[client] = mine
            return .success(previous.map { ($0.client, $0.bytes) })
        }
        return try outcome.get()
    }

    /// Puts back what `topic` held before a ``take(_:bytes:by:)`` whose publish failed.
    func restore(_ topic: Topic, _ previous: (client: String, bytes: Int)?) {
        state.withLock { state in
            // Only the entry this publish made: another client's, made since, stays.
            guard let current = state.owners[topic.name], current.sequence == nil else { return }
            state.owners.removeValue(forKey: topic.name)
            Self.remove(current, from: &state)
            guard let previous else { return }
            state.owners[topic.name] = (previous.client, previous.bytes, nil)
            state.held[previous.client, default: (0, 0)].topics += 1
            state.held[previous.client, default: (0, 0)].bytes += previous.bytes
        }
    }

    /// Notes the number the daemon gave the message that `client` retained on `topic`.
    func settle(_ topic: Topic, of client: String, sequence: UInt64) {
        state.withLock { state in
            guard let entry = state.owners[topic.name], entry.client == client else { return }
            state.owners[topic.name] = (client, entry.bytes, sequence)
        }
    }

    /// The topics `client` holds with the numbers of their messages, for the gateway to check against the daemon.
    func candidates(of client: String) -> [(topic: String, sequence: UInt64)] {
        state.withLock { state in
            state.owners.compactMap { name, entry in
                guard entry.client == client, let sequence = entry.sequence else { return nil }
                return (name, sequence)
            }
        }
    }

    /// Forgets `topic` for `client` if its entry is still message `sequence`: the daemon holds it no more.
    func forget(_ topic: String, of client: String, sequence: UInt64) {
        state.withLock { state in
            guard let entry = state.owners[topic], entry.client == client, entry.sequence == sequence else { return }
            state.owners.removeValue(forKey: topic)
            Self.remove(entry, from: &state)
        }
    }

    /// What `client` holds now.
    func held(by client: String) -> (topics: Int, bytes: Int) {
        state.withLock { $0.held[client] ?? (0, 0) }
    }

    private static func remove(_ entry: (client: String, bytes: Int, sequence: UInt64?), from state: inout State) {
        var held = state.held[entry.client, default: (0, 0)]
        held.topics -= 1
        held.bytes -= entry.bytes
        state.held[entry.client] = held.topics > 0 ? held : nil
    }
}
