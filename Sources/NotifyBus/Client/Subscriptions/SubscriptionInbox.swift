import Synchronization
import NotifyProtocol

/// The events of one subscription on their way from the connection's event loop to its consumer.
///
/// The event loop gathers the events of one read of the socket and adds them at the end of the read: one lock and
/// one wake-up of the consumer per read, not per message. The consumer takes everything that waits
/// with one lock and goes through it without another (``NotifySubscription/Iterator``). What waits here counts
/// against the subscription's ``SubscriptionBufferLimits`` until its consumer is done with the batch it belongs to.
final class SubscriptionInbox: Sendable {
    /// How the subscription ended, once it did.
    enum Ending {
        case finished
        case failed(any Error)
    }

    /// A batch of events and their size as counted against the limits.
    struct Batch {
        var events: [SubscriptionEvent] = []
        var bytes = 0

        /// Moves the event at `index` out to the consumer, leaving a placeholder that holds nothing: the consumer
        /// owns it without a retain of its topic and payload, and letting go of the batch releases nothing of it
        /// again. Each index is taken once.
        mutating func takeEvent(at index: Int) -> SubscriptionEvent {
            events.withUnsafeMutableBufferPointer { events in
                let slot = events.baseAddress! + index
                let event = slot.move()
                slot.initialize(to: .dropped(DropNotice(topic: Topic(unchecked: ""), count: 0, firstSequence: 0, lastSequence: 0)))
                return event
            }
        }
    }

    private struct State {
        var waiting = Batch()
        /// The consumer waiting for events, resumed by a hand-over, the end, or its cancellation.
        var consumer: CheckedContinuation<Void, Never>?
        var ending: Ending?
        /// Set once the ending was given to the consumer: a later `take` returns nil.
        var endingTaken = false
    }

    private let state = Mutex(State())

    /// Adds the events of one read (their sizes as ``SubscriptionEvent/bufferedSize`` counts them), and wakes the
    /// consumer if it waits. On the event loop.
    func append(_ batch: Batch) {
        let consumer = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard state.ending == nil, !batch.events.isEmpty else { return nil }
            if state.waiting.events.isEmpty {
                state.waiting = batch
            } else {
                state.waiting.events.append(contentsOf: batch.events)
                state.waiting.bytes += batch.bytes
            }
            defer { state.consumer = nil }
            return state.consumer
        }
        consumer?.resume()
    }

    /// Ends the subscription: the consumer gets what waits, then the end (nil, or `error` thrown).
    func finish(_ error: (any Error)?) {
        let consumer = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard state.ending == nil else { return nil }
            state.ending = error.map { .failed($0) } ?? .finished
            defer { state.consumer = nil }
            return state.consumer
        }
        consumer?.resume()
    }

    /// Everything that waits, if something does; nil without waiting otherwise (the end included: ``take()`` says
    /// it).
    func takeWaiting() -> Batch? {
        state.withLock { state in
            guard !state.waiting.events.isEmpty else { return nil }
            defer { state.waiting = Batch() }
            return state.waiting
        }
    }

    /// Everything that waits, once there is something; nil once the subscription ended normally (or its consumer's
    /// task was cancelled), after the last events.
    /// - Throws: the error it ended with, after the last events.
    func take() async throws -> Batch? {
        while true {
            enum Step {
                case batch(Batch)
                case end(Ending?)
                case wait
            }
            let step = state.withLock { state -> Step in
                if !state.waiting.events.isEmpty {
                    defer { state.waiting = Batch() }
                    return .batch(state.waiting)
                }
                guard let ending = state.ending else { return .wait }
                if state.endingTaken { return .end(nil) }
                state.endingTaken = true
                return .end(ending)
            }
            switch step {
            case .batch(let batch):
                return batch
            case .end(.failed(let error)?):
                throw error
            case .end:
                return nil
            case .wait:
                if Task.isCancelled {
                    finish(nil)
                    continue
                }
                await withTaskCancellationHandler {
                    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                        let now = state.withLock { state -> Bool in
                            if !state.waiting.events.isEmpty || state.ending != nil { return true }
                            state.consumer = continuation
                            return false
                        }
                        if now { continuation.resume() }
                    }
                } onCancel: {
                    // A consumer that stopped iterating ends the subscription, as leaving a stream does.
                    finish(nil)
                }
            }
        }
    }
}
