import NotifyProtocol

/// An object that receives a ``Messenger``'s messages: the Observer of the Observer pattern.
///
/// A messenger holds its observers weakly: registering an object does not keep it alive, and once it is
/// deallocated it is never called again and its registration is dropped.
///
/// `receive(_:)` is called on the thread that is delivering (see ``Messenger``), never concurrently with another
/// call from the same messenger.
public protocol MessengerObserver<Message>: AnyObject, Sendable {
    /// The kind of message observed.
    associatedtype Message: Sendable

    /// Called with each message the observer is registered for.
    func receive(_ message: Message)
}
