internal import DequeModule
import Synchronization

/// The messages of one observer that runs on the main actor, handed to it one at a time and in the order they came.
///
/// A message that comes on the main actor while nothing waits is handed over at once, before ``deliver(_:)``
/// returns: a `send` on the main actor reaches a main-actor observer as it reaches any other, without a task. One
/// that comes from another thread, or behind others still waiting, waits here for a task on the main actor, which
/// hands out at most ``batch`` before it lets the main actor run other work. The sender never waits for the main
/// actor: a bounded inbox drops instead, and says so (`onDropped`).
package final class MainActorInbox<Message: Sendable>: Sendable {
    /// How many messages may wait, and which go when more come.
    package enum Limit: Sendable {
        case unbounded
        /// At most `n`; the oldest waiting goes for a new one.
        case newest(Int)
        /// At most `n`; a new one goes.
        case oldest(Int)

        /// The limit an `AsyncStream` buffering policy describes.
        package init<Element>(_ policy: AsyncStream<Element>.Continuation.BufferingPolicy) {
            switch policy {
            case .bufferingNewest(let count): self = .newest(count)
            case .bufferingOldest(let count): self = .oldest(count)
            default: self = .unbounded
            }
        }
    }

    private struct State {
        var waiting = Deque<Message>()
        /// A task on the main actor will hand out what waits.
        var isScheduled = false
        /// The main actor is handing out messages now: whatever comes waits for it, in order.
        var isDraining = false
        var isClosed = false
    }

    /// How many messages one turn on the main actor hands out.
    static var batch: Int { 256 }

    private let state = Mutex(State())
    private let limit: Limit
    private let handler: @MainActor @Sendable (Message) -> Void
    private let onDropped: @Sendable (Message) -> Void

    package init(
        limit: Limit,
        onDropped: @escaping @Sendable (Message) -> Void,
        handler: @escaping @MainActor @Sendable (Message) -> Void
    ) {
        self.limit = limit
        self.onDropped = onDropped
        self.handler = handler
    }

    /// Hands `message` to the observer: at once when called on the main actor with nothing waiting, else through the
    /// inbox.
    package func deliver(_ message: Message) {
        let onMainActor = MainThread.isCurrent
        let (runNow, schedule, dropped): (Bool, Bool, Message?) = state.withLock { state in
            if state.isClosed { return (false, false, nil) }
            if onMainActor, !state.isDraining, state.waiting.isEmpty {
                state.isDraining = true
                return (true, false, nil)
            }
            var dropped: Message?
            switch limit {
            case .unbounded:
                state.waiting.append(message)
            case .newest(let count):
                if count <= 0 {
                    dropped = message
                } else {
                    if state.waiting.count >= count { dropped = state.waiting.popFirst() }
                    state.waiting.append(message)
                }
            case .oldest(let count):
                if state.waiting.count >= count { dropped = message } else { state.waiting.append(message) }
            }
            guard !state.isDraining, !state.isScheduled, !state.waiting.isEmpty else { return (false, false, dropped) }
            state.isScheduled = true
            return (false, true, dropped)
        }
        if let dropped { onDropped(dropped) }
        if runNow {
            MainActor.assumeIsolated {
                handler(message)
                handOut()
            }
        } else if schedule {
            Task { @MainActor in self.takeTurn() }
        }
    }

    /// Stops handing out: what waits is let go of, and nothing is handed out after this returns but a call already
    /// under way.
    package func close() {
        state.withLock { state in
            state.isClosed = true
            state.waiting.removeAll()
        }
    }

    @MainActor
    private func takeTurn() {
        let mine = state.withLock { state in
            state.isScheduled = false
            guard !state.isDraining, !state.isClosed, !state.waiting.isEmpty else { return false }
            state.isDraining = true
            return true
        }
        if mine { handOut() }
    }

    /// Hands out what waits, a batch at most, while this turn holds ``State/isDraining``; gives the turn up when the
    /// inbox is empty, or schedules the next turn after a batch.
    @MainActor
    private func handOut() {
        var handed = 0
        while true {
            let (next, scheduleNext): (Message?, Bool) = state.withLock { state in
                if state.isClosed || state.waiting.isEmpty {
                    state.isDraining = false
                    return (nil, false)
                }
                if handed == Self.batch {
                    state.isDraining = false
                    state.isScheduled = true
                    return (nil, true)
                }
                return (state.waiting.popFirst(), false)
            }
            if scheduleNext { Task { @MainActor in self.takeTurn() } }
            guard let next else { return }
            handler(next)
            handed += 1
        }
    }
}
