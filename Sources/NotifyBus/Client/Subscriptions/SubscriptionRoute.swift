import NIOConcurrencyHelpers
import NIOCore
import NotifyProtocol

/// Where a subscription of a client that reconnects is reached: the handler of the connection it is on and its id
/// there, both of which change when it is carried over to a new connection. Its consumer ends it, and says it caught
/// up, through this.
final class SubscriptionRoute: Sendable {
    private struct Place: Sendable {
        let handler: NIOLoopBound<ClientChannelHandler>
        let eventLoop: any EventLoop
        let id: UInt64
    }

    private let place = NIOLockedValueBox<Place?>(nil)
    private let ended = NIOLockedValueBox(false)

    /// Whether its consumer stopped iterating: it is not carried over any more.
    var isEnded: Bool { ended.withLockedValue { $0 } }

    /// Notes that the subscription is now `id` on the connection of `handler`. Call on that connection's event loop.
    func move(to handler: ClientChannelHandler, on eventLoop: any EventLoop, id: UInt64) {
        place.withLockedValue { $0 = Place(handler: NIOLoopBound(handler, eventLoop: eventLoop), eventLoop: eventLoop, id: id) }
    }

    /// Ends the subscription where it is: its consumer stopped iterating.
    func end() {
        ended.withLockedValue { $0 = true }
        guard let place = place.withLockedValue({ $0 }) else { return }
        place.eventLoop.execute { place.handler.value.removeSubscription(place.id) }
    }

    /// Tells the connection it is on that its consumer caught up.
    func caughtUp() {
        guard let place = place.withLockedValue({ $0 }) else { return }
        place.eventLoop.execute { place.handler.value.subscriptionCaughtUp(place.id) }
    }
}
