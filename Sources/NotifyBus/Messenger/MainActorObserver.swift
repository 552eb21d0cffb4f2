import NotifyProtocol

/// An object on the main actor that receives messages: a view model, say, observing a ``Messenger`` or a
/// NotifyCenter's channel without leaving its actor.
///
/// ```swift
/// @MainActor final class StatusModel: MainActorObserver {
///     var status = "unknown"
///     func receive(_ message: String) { status = message }
/// }
/// messenger.add(model)
/// ```
///
/// It is held weakly, as a ``MessengerObserver`` is, and `receive(_:)` is always called on the main actor, one
/// message at a time, in the order they were sent. A messenger calls it at once when a message is sent on the main
/// actor and nothing waits, else from a task on the main actor (see
/// ``Messenger/observeOnMainActor(latestFirst:where:from:bufferingPolicy:_:)``); a NotifyCenter always from its
/// queue, so that a busy main actor holds back none of its other observers.
@MainActor
public protocol MainActorObserver<Message>: AnyObject, Sendable {
    /// The kind of message observed.
    associatedtype Message: Sendable

    /// Called on the main actor with each message the observer is registered for.
    func receive(_ message: Message)
}
