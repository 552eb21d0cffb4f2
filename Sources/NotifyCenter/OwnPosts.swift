internal import DequeModule
import NotifyBus
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The latest notifications a center posted itself, by topic and number, to leave out while it does not hear its
/// own posts.
///
/// The daemon leaves a connection's own messages out of what it delivers to it (`OPT noecho`), but when the
/// connection is lost and a subscription resumes from the daemon's history on a new one, the history holds them like
/// any other message, and the new connection has no way to tell them from another's: the center leaves them out
/// itself. Only acknowledged posts are known by number (``NotifyCenter/post(_:retain:)``); one sent without
/// (``NotifyCenter/send(_:retain:)``) may come back after a reconnect. Bounded: the last ``capacity`` posts, more
/// than a history holds of a topic by default (64).
final class OwnPosts: Sendable {
    struct Post: Hashable {
        let topic: Topic
        let sequence: UInt64
    }

    static let capacity = 4_096
    private static let processID = getpid()

    private let state = Mutex<(order: Deque<Post>, members: Set<Post>)>(([], []))
    /// Whether the center hears its own posts now: its client's echo, asked at each message of this process (the
    /// client may be told otherwise after the center was made).
    private let isHeard: @Sendable () -> Bool

    init(isHeard: @escaping @Sendable () -> Bool) {
        self.isHeard = isHeard
    }

    func posted(_ sequence: UInt64, to topic: Topic) {
        let post = Post(topic: topic, sequence: sequence)
        state.withLock { state in
            guard state.members.insert(post).inserted else { return }
            state.order.append(post)
            if state.order.count > OwnPosts.capacity, let oldest = state.order.popFirst() { state.members.remove(oldest) }
        }
    }

    func contains(_ delivery: Delivery) -> Bool {
        // Another host's or another process's messages are never this center's (numbers a topic gives again after
        // its state was lost must not hide them).
        guard delivery.publisher.host == nil, delivery.publisher.pid == OwnPosts.processID, !isHeard() else { return false }
        return state.withLock { $0.members.contains(Post(topic: delivery.topic, sequence: delivery.sequence)) }
    }
}
