import NotifyProtocol

/// What a ``Messenger`` and a NotifyCenter's channel (`center.channel(for:)`) both offer for one kind of message:
/// post, observe, the latest, clear, the asynchronous sequence. A service written against it runs on the host's
/// notifyd in production and on an in-process `Messenger` in its tests:
///
/// ```swift
/// struct Temperature: NotifyMessage, Codable {             // NotifyMessage: NotifyCenter's
///     static let topic = Topic.literal("thermostat.temperature")
///     var celsius: Double
/// }
/// struct Thermostat<Readings: MessageChannel<Temperature>> {
///     let readings: Readings
///     func report(_ celsius: Double) async throws { try await readings.post(Temperature(celsius: celsius)) }
/// }
/// let live = Thermostat(readings: center.channel(for: Temperature.self))   // across processes
/// let test = Thermostat(readings: Messenger<Temperature>())                // in a test
/// ```
///
/// Each requirement means the same on both; where a process boundary makes a difference, the channel says so
/// (the latest is the daemon's; `sendLatest` re-sends it to the center's own observers). A `Messenger` never throws
/// and never suspends in these calls: its conformance is its synchronous API.
public protocol MessageChannel<Message>: Sendable {
    /// The kind of message.
    associatedtype Message: Sendable
    /// What ``messages(latestFirst:where:)`` returns.
    associatedtype Messages: AsyncSequence where Messages.Element == Message

    /// Sends `message` to every observer, and keeps it as the latest; returns once it is there.
    nonisolated(nonsending) func post(_ message: Message) async throws
    /// The same, except to `sender` (an observer object, an owner, or an ``ObservationToken``): no echo to the
    /// observer that posts.
    nonisolated(nonsending) func post(_ message: Message, from sender: AnyObject) async throws

    /// The last message posted (or the initial value), nil when there is none.
    var latest: Message? { get async throws }
    /// Forgets the latest without sending anything.
    nonisolated(nonsending) func clear() async throws
    /// Sends the latest again to the observers registered now but the one that posted it; false when there was none.
    @discardableResult
    nonisolated(nonsending) func sendLatest() async throws -> Bool

    /// Calls `handler` with each message from now on (with `latestFirst`, the latest first) that `isIncluded`
    /// selects, until the returned token is cancelled or deallocated.
    func observe(
        latestFirst: Bool,
        where isIncluded: (@Sendable (Message) -> Bool)?,
        _ handler: @escaping @Sendable (Message) -> Void
    ) async throws -> ObservationToken
    /// The same, for as long as `owner` exists, handing it to `handler`; `remove(owner)` ends it.
    func observe<Owner: AnyObject & Sendable>(
        owner: Owner,
        latestFirst: Bool,
        where isIncluded: (@Sendable (Message) -> Bool)?,
        _ handler: @escaping @Sendable (Owner, Message) -> Void
    ) async throws
    /// Calls `handler` on the main actor, in order, without holding back the sender or other observers.
    func observeOnMainActor(
        latestFirst: Bool,
        where isIncluded: (@Sendable (Message) -> Bool)?,
        _ handler: @escaping @MainActor @Sendable (Message) -> Void
    ) async throws -> ObservationToken
    /// The same, for as long as `owner` exists, handing it to `handler` on the main actor.
    func observeOnMainActor<Owner: AnyObject & Sendable>(
        owner: Owner,
        latestFirst: Bool,
        where isIncluded: (@Sendable (Message) -> Bool)?,
        _ handler: @escaping @MainActor @Sendable (Owner, Message) -> Void
    ) async throws
    /// Registers `observer`, held weakly.
    func add<Observer: MessengerObserver>(
        _ observer: Observer,
        latestFirst: Bool,
        where isIncluded: (@Sendable (Message) -> Bool)?
    ) async throws where Observer.Message == Message
    /// Registers `observer`, held weakly, called on the main actor.
    func add<Observer: MainActorObserver>(
        _ observer: Observer,
        latestFirst: Bool,
        where isIncluded: (@Sendable (Message) -> Bool)?
    ) async throws where Observer.Message == Message
    /// Ends every registration of `observer` (an object, an owner, or a token) at once; whether it had any.
    @discardableResult
    func remove(_ observer: AnyObject) -> Bool

    /// The messages from now on (with `latestFirst`, the latest first) that `isIncluded` selects.
    func messages(latestFirst: Bool, where isIncluded: (@Sendable (Message) -> Bool)?) async throws -> Messages

    // The shorter forms, as requirements: a method of an extension that is `async` would be preferred, in an `async`
    // context, to a `Messenger`'s own synchronous one, and make calls on a messenger need `try await`.

    /// ``observe(latestFirst:where:_:)`` for every message from now on.
    func observe(_ handler: @escaping @Sendable (Message) -> Void) async throws -> ObservationToken
    /// ``observe(owner:latestFirst:where:_:)`` for every message from now on.
    func observe<Owner: AnyObject & Sendable>(owner: Owner, _ handler: @escaping @Sendable (Owner, Message) -> Void) async throws
    /// ``observeOnMainActor(latestFirst:where:_:)`` for every message from now on.
    func observeOnMainActor(_ handler: @escaping @MainActor @Sendable (Message) -> Void) async throws -> ObservationToken
    /// ``observeOnMainActor(owner:latestFirst:where:_:)`` for every message from now on.
    func observeOnMainActor<Owner: AnyObject & Sendable>(
        owner: Owner,
        _ handler: @escaping @MainActor @Sendable (Owner, Message) -> Void
    ) async throws
    /// `add(_:latestFirst:where:)` for every message from now on.
    func add<Observer: MessengerObserver>(_ observer: Observer) async throws where Observer.Message == Message
    /// `add(_:latestFirst:where:)` for every message from now on, on the main actor.
    func add<Observer: MainActorObserver>(_ observer: Observer) async throws where Observer.Message == Message
    /// ``messages(latestFirst:where:)`` for every message from now on.
    var messages: Messages { get async throws }
}
