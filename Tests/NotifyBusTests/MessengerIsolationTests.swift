import Foundation
import NotifyBus
import Synchronization
import Testing

/// A view model as a Swift 6.2 app writes one: main-actor isolated, mutable, neither `@unchecked Sendable` nor
/// `nonisolated` anywhere; it observes as a ``MainActorObserver`` and through closures handed to it as their owner.
@MainActor
final class CountingModel: MainActorObserver {
    private(set) var values: [Int] = []
    private var waiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []

    func receive(_ message: Int) { apply(message) }

    func apply(_ message: Int) {
        values.append(message)
        let ready = waiters.filter { $0.count <= values.count }
        waiters.removeAll { $0.count <= values.count }
        for waiter in ready { waiter.continuation.resume() }
    }

    /// Returns once `count` messages are in (the suite's time limit fails a test whose messages never come).
    func waitFor(_ count: Int) async {
        if values.count >= count { return }
        await withCheckedContinuation { waiters.append((count, $0)) }
    }
}

/// Sends `messages` from a thread of its own while the caller blocks: on the main actor, nothing of the main actor
/// runs meanwhile, so what they bring for it must wait.
func sendFromAnotherThread(_ messenger: Messenger<Int>, _ messages: ClosedRange<Int>) {
    let sent = DispatchSemaphore(value: 0)
    Thread.detachNewThread {
        for message in messages { messenger.send(message) }
        sent.signal()
    }
    sent.wait()
}

// Three minutes, not one: its main-actor tests share the main thread with every other suite of the test process, some
// of which hold it on purpose for a while (NotifyCenterParityTests' busy main actor).
@Suite("Messenger: main-actor observers, owners handed over, async handlers, one protocol", .timeLimit(.minutes(3)))
struct MessengerIsolationTests {
    @Test("a send on the main actor calls a main-actor observer before it returns; messages from elsewhere that still wait go first")
    @MainActor
    func synchronousOnTheMainActor() async {
        let messenger = Messenger<Int>()
        let model = CountingModel()
        messenger.add(model)
        messenger.send(1)
        #expect(model.values == [1], "handed over before send returned, with no task between")

        sendFromAnotherThread(messenger, 2...50)
        messenger.send(51)
        #expect(model.values == [1], "51 waits behind 2…50, which wait for the main actor")
        await model.waitFor(51)
        #expect(model.values == Array(1...51), "in order")
        messenger.send(52)
        #expect(model.values.last == 52, "nothing waits any more: at once again")
    }

    @Test("a busy main actor holds back neither send nor the other observers; a bounded inbox drops and counts")
    @MainActor
    func busyMainActor() async {
        let messenger = Messenger<Int>()
        let model = CountingModel()
        let newest = CountingModel()
        messenger.add(model)
        messenger.observeOnMainActor(owner: newest, bufferingPolicy: .bufferingNewest(10)) { newest, message in newest.apply(message) }
        let elsewhere = Recorder<Int>()
        let token = messenger.observe { elsewhere.append($0) }
        // The main actor is held (this test blocks it) while another thread sends 1,000.
        sendFromAnotherThread(messenger, 1...1_000)
        #expect(elsewhere.values.count == 1_000, "the other observer had them all before the main actor was free")
        #expect(model.values.isEmpty && newest.values.isEmpty)
        #expect(messenger.droppedCount == 990)
        await model.waitFor(1_000)
        await newest.waitFor(10)
        #expect(model.values == Array(1...1_000))
        #expect(newest.values == Array(991...1_000), "the newest ten, the rest counted as dropped")
        token.cancel()
    }

    @Test("an owner is handed to its handler, held weakly; remove(owner) stops it, also for what waited for the main actor")
    @MainActor
    func ownerHandedOver() async {
        let messenger = Messenger<Int>()
        var model: CountingModel? = CountingModel()
        messenger.observeOnMainActor(owner: model!) { model, message in model.apply(message) }
        messenger.send(1)
        #expect(model?.values == [1])

        sendFromAnotherThread(messenger, 2...3)
        #expect(messenger.remove(model!), "it had a registration")
        let marker = CountingModel()
        messenger.add(marker)
        sendFromAnotherThread(messenger, 4...4)
        await marker.waitFor(1)
        #expect(model?.values == [1], "2 and 3 waited for the main actor and were let go of with the registration")

        let other = CountingModel()
        messenger.observeOnMainActor(owner: other) { other, message in other.apply(message) }
        model = nil
        messenger.send(5)
        #expect(messenger.observerCount == 2, "the marker and the other owner; the removed one went")
    }

    @Test("dispose(token) and close() end a main-actor observer's queue too: what waited is not handed out")
    @MainActor
    func disposeEndsTheQueue() async {
        let messenger = Messenger<Int>()
        let disposed = CountingModel()
        let closed = CountingModel()
        let disposedToken = messenger.observeOnMainActor { disposed.apply($0) }
        let closedToken = messenger.observeOnMainActor { closed.apply($0) }
        sendFromAnotherThread(messenger, 1...3)
        messenger.dispose(disposedToken)
        #expect(disposedToken.isCancelled)
        let marker = CountingModel()
        let second = Messenger<Int>()
        second.add(marker)
        messenger.close()
        #expect(closedToken.isCancelled)
        // A message for the marker, from another thread: its turn on the main actor comes after theirs.
        sendFromAnotherThread(second, 1...1)
        await marker.waitFor(1)
        #expect(disposed.values.isEmpty && closed.values.isEmpty, "1…3 waited for the main actor and were let go of")
    }

    @Test("observe(owner:) hands its owner to a nonisolated handler and ends with it")
    func ownerNonisolated() {
        final class Owner: Sendable { let seen = Recorder<Int>() }
        let messenger = Messenger<Int>()
        var owner: Owner? = Owner()
        messenger.observe(owner: owner!) { owner, message in owner.seen.append(message) }
        messenger.send(1)
        let seen = owner!.seen
        owner = nil
        messenger.send(2)
        #expect(seen.values == [1])
        #expect(messenger.observerCount == 0, "dropped when it was found gone")
    }

    @Test("an async handler is called in order, one call at a time, where it was written")
    @MainActor
    func asyncHandler() async {
        let messenger = Messenger<Int>()
        let model = CountingModel()
        let inside = Atomic<Int>(0)
        let overlapped = Atomic<Bool>(false)
        let token = messenger.observe { message in
            // Written in a main-actor function: the handler is on the main actor, and may use the model as is.
            MainActor.assertIsolated()
            if inside.add(1, ordering: .relaxed).newValue > 1 { overlapped.store(true, ordering: .relaxed) }
            await Task.yield()
            model.apply(message)
            inside.subtract(1, ordering: .relaxed)
        }
        for message in 1...200 { messenger.send(message) }
        await model.waitFor(200)
        #expect(model.values == Array(1...200))
        let didOverlap = overlapped.load(ordering: .relaxed)
        #expect(!didOverlap)
        token.cancel()
    }

    @Test("close() ends every observer and stream; send goes on keeping the latest")
    func close() async {
        let messenger = Messenger<Int>()
        let seen = Recorder<Int>()
        let observer = RecordingObserver()
        messenger.add(observer)
        let token = messenger.observe { seen.append($0) }
        let stream = messenger.messages
        messenger.send(1)
        messenger.close()
        messenger.send(2)
        #expect(seen.values == [1] && observer.recorder.values == [1])
        #expect(messenger.observerCount == 0)
        var streamed: [Int] = []
        for await message in stream { streamed.append(message) }
        #expect(streamed == [1], "the stream ended after what it had")
        #expect(messenger.latest == 2)
        _ = token
    }

    @Test("a service written against MessageChannel runs on a Messenger")
    func serviceOnAMessenger() async throws {
        let readings = Messenger<Double>()
        let service = Thermostat(readings: readings)
        let alarms = Recorder<Double>()
        let token = try await service.watchAlarms { alarms.append($0) }
        try await service.report(21.5)
        try await service.report(40)
        #expect(alarms.values == [40])
        #expect(try await service.current() == 40)
        readings.clear()
        #expect(try await service.current() == nil)
        token.cancel()
    }
}

/// A service that depends only on ``MessageChannel``: the host's notifyd in production, a `Messenger` in tests.
struct Thermostat<Readings: MessageChannel<Double>> {
    let readings: Readings

    func report(_ celsius: Double) async throws { try await readings.post(celsius) }

    func current() async throws -> Double? { try await readings.latest }

    func watchAlarms(_ alarm: @escaping @Sendable (Double) -> Void) async throws -> ObservationToken {
        try await readings.observe(latestFirst: false, where: { $0 > 30 }, alarm)
    }
}
