import NotifyBus
import Synchronization
import Testing

/// Collects what an observer was called with, from any thread.
final class Recorder<Value: Sendable>: Sendable {
    private let storage = Mutex<[Value]>([])
    func append(_ value: Value) { storage.withLock { $0.append(value) } }
    var values: [Value] { storage.withLock { $0 } }
}

/// An observer object that records its messages.
final class RecordingObserver: MessengerObserver {
    let recorder = Recorder<Int>()
    let onReceive: (@Sendable (Int) -> Void)?
    init(onReceive: (@Sendable (Int) -> Void)? = nil) { self.onReceive = onReceive }
    func receive(_ message: Int) {
        recorder.append(message)
        onReceive?(message)
    }
}

/// An observer that reports its own deallocation.
final class MortalObserver: MessengerObserver {
    let received: Recorder<Int>
    let deaths: Recorder<Bool>
    init(received: Recorder<Int>, deaths: Recorder<Bool>) {
        self.received = received
        self.deaths = deaths
    }
    func receive(_ message: Int) { received.append(message) }
    deinit { deaths.append(true) }
}

@Suite("Messenger", .timeLimit(.minutes(3)))
struct MessengerTests {
    // MARK: observer objects held weakly

    @Test("an observer object is held weakly: once deallocated it is never called and its registration goes")
    func weakObservers() {
        let messenger = Messenger<Int>()
        let received = Recorder<Int>()
        let deaths = Recorder<Bool>()
        var observer: MortalObserver? = MortalObserver(received: received, deaths: deaths)
        messenger.add(observer!)
        messenger.send(1)
        #expect(received.values == [1])

        observer = nil
        #expect(deaths.values == [true], "the messenger must not keep its observer alive")
        messenger.send(2)
        #expect(received.values == [1])
        #expect(messenger.observerCount == 0, "the dead registration is dropped, not leaked")
        _ = observer
    }

    @Test("observers that die while nothing is sent do not pile up: registering sweeps the dead ones")
    func deadObserversDoNotPileUp() {
        let messenger = Messenger<Int>()
        let received = Recorder<Int>()
        let deaths = Recorder<Bool>()
        let survivor = RecordingObserver()
        messenger.add(survivor)
        for _ in 0..<10_000 {
            messenger.add(MortalObserver(received: received, deaths: deaths))
        }
        #expect(deaths.values.count == 10_000)
        #expect(messenger.observerCount <= 32, "at most a sweep's worth of dead registrations, not 10,000")
        messenger.send(1)
        #expect(messenger.observerCount == 1)
        #expect(survivor.recorder.values == [1])
        #expect(received.values.isEmpty)
    }

    // MARK: closure observers

    @Test("a closure observer runs until its token is cancelled")
    func tokenCancel() {
        let messenger = Messenger<Int>()
        let received = Recorder<Int>()
        let token = messenger.observe { received.append($0) }
        messenger.send(1)
        token.cancel()
        #expect(token.isCancelled)
        messenger.send(2)
        token.cancel()  // a second cancel is harmless
        #expect(received.values == [1])
        #expect(messenger.observerCount == 0)
    }

    @Test("a closure observer stops when its token is deallocated")
    func tokenDeinit() {
        let messenger = Messenger<Int>()
        let received = Recorder<Int>()
        var token: ObservationToken? = messenger.observe { received.append($0) }
        messenger.send(1)
        token = nil
        messenger.send(2)
        #expect(received.values == [1])
        #expect(messenger.observerCount == 0)
        _ = token
    }

    // MARK: add / remove / dispose

    @Test("remove is immediate, even for a message whose delivery is under way")
    func removeIsImmediate() {
        let messenger = Messenger<Int>()
        let second = RecordingObserver()
        let first = RecordingObserver { [weak messenger, weak second] _ in
            if let messenger, let second { messenger.remove(second) }
        }
        messenger.add(first)
        messenger.add(second)
        #expect(messenger.observerCount == 2)
        messenger.send(1)
        #expect(first.recorder.values == [1])
        #expect(second.recorder.values == [], "removed by the first observer before its turn came")
        #expect(messenger.observerCount == 1)
        #expect(!messenger.remove(second))
    }

    @Test("dispose marks the observer; it is not called again and is dropped before the next send")
    func disposeIsDeferred() {
        let messenger = Messenger<Int>()
        let observer = RecordingObserver()
        messenger.add(observer)
        messenger.send(1)
        messenger.dispose(observer)
        #expect(messenger.observerCount == 1, "dispose only marks")
        messenger.send(2)
        #expect(messenger.observerCount == 0, "dropped before the next send went out")
        #expect(observer.recorder.values == [1])
    }

    @Test("remove and dispose also name closure observers by their token")
    func removeByToken() {
        let messenger = Messenger<Int>()
        let removedReceived = Recorder<Int>()
        let disposedReceived = Recorder<Int>()
        let removed = messenger.observe { removedReceived.append($0) }
        let disposed = messenger.observe { disposedReceived.append($0) }
        messenger.send(1)
        #expect(messenger.remove(removed))
        messenger.dispose(disposed)
        messenger.send(2)
        #expect(removedReceived.values == [1])
        #expect(disposedReceived.values == [1])
        #expect(messenger.observerCount == 0)
        _ = (removed, disposed)
    }

    @Test("an observer disposed during a delivery is not called with the message under way, nor after")
    func disposeDuringDelivery() {
        let messenger = Messenger<Int>()
        let later = RecordingObserver()
        let first = RecordingObserver { [weak messenger, weak later] value in
            if value == 2, let messenger, let later { messenger.dispose(later) }
        }
        messenger.add(first)
        messenger.add(later)
        messenger.send(1)
        messenger.send(2)
        messenger.send(3)
        #expect(first.recorder.values == [1, 2, 3])
        #expect(later.recorder.values == [1], "disposed before its turn for 2 came")
        #expect(messenger.observerCount == 1)
    }

    @Test("a closure observer may cancel its own token from inside its handler")
    func cancelFromInsideHandler() {
        let messenger = Messenger<Int>()
        let received = Recorder<Int>()
        let ownToken = Recorder<ObservationToken>()
        let token = messenger.observe { value in
            received.append(value)
            if value == 2 { ownToken.values.first?.cancel() }
        }
        ownToken.append(token)
        for value in 1...4 { messenger.send(value) }
        #expect(received.values == [1, 2])
        #expect(token.isCancelled)
        #expect(messenger.observerCount == 0)
    }

    // MARK: send

    @Test("every observer gets every message in the order sent")
    func orderOfSends() {
        let messenger = Messenger<Int>()
        let observers = (0..<5).map { _ in RecordingObserver() }
        for observer in observers { messenger.add(observer) }
        for value in 1...100 { messenger.send(value) }
        for observer in observers { #expect(observer.recorder.values == Array(1...100)) }
    }

    @Test("a send from inside an observer reaches everyone after the current message, never before it")
    func nestedSend() {
        let messenger = Messenger<Int>()
        let first = RecordingObserver { [weak messenger] value in
            if value == 1 { messenger?.send(2) }
        }
        let second = RecordingObserver()
        messenger.add(first)
        messenger.add(second)
        messenger.send(1)
        #expect(first.recorder.values == [1, 2])
        #expect(second.recorder.values == [1, 2], "the second observer must not see 2 before 1")
    }

    @Test("an observer may add and remove observers while being called")
    func reentrantRegistration() {
        let messenger = Messenger<Int>()
        let late = Recorder<Int>()
        let tokens = Mutex<[ObservationToken]>([])
        let token = messenger.observe { [weak messenger] value in
            guard let messenger else { return }
            if value == 1 { tokens.withLock { $0.append(messenger.observe { late.append($0) }) } }
            if value == 3 { tokens.withLock { $0.removeAll() } }
        }
        for value in 1...4 { messenger.send(value) }
        #expect(late.values == [2], "added during 1, so it gets 2; removed during 3 before its turn")
        _ = token
    }

    @Test("an observer added while messages are queued receives only messages sent after it was added")
    func addedDuringQueue() {
        let messenger = Messenger<Int>()
        let late = RecordingObserver()
        let token = messenger.observe { [weak messenger] value in
            guard let messenger, value == 1 else { return }
            messenger.send(2)  // queued behind 1
            messenger.add(late)  // added after 2 was sent
            messenger.send(3)
        }
        messenger.send(1)
        #expect(late.recorder.values == [3])
        _ = token
    }

    // MARK: latest

    @Test("the latest message is buffered by default and can be reset without sending")
    func latestBuffered() {
        let messenger = Messenger<String>()
        #expect(messenger.latest == nil)
        let received = Recorder<String>()
        let token = messenger.observe { received.append($0) }
        messenger.send("a")
        messenger.send("b")
        #expect(messenger.latest == "b")
        messenger.clear()
        #expect(messenger.latest == nil)
        #expect(received.values == ["a", "b"], "reset sends nothing")
        _ = token
    }

    @Test("buffering can be switched off")
    func latestOff() {
        let unbuffered = Messenger<Int>(buffersLatest: false)
        unbuffered.send(1)
        #expect(unbuffered.latest == nil)

        let messenger = Messenger<Int>()
        messenger.send(1)
        messenger.buffersLatest = false
        #expect(messenger.latest == nil, "switching off forgets the buffered message")
        messenger.send(2)
        #expect(messenger.latest == nil)
        messenger.buffersLatest = true
        messenger.send(3)
        #expect(messenger.latest == 3)
    }

    // MARK: select

    @Test("observers can select messages equal to a value or matching a predicate")
    func select() {
        let messenger = Messenger<Int>()
        let equal = Recorder<Int>()
        let even = Recorder<Int>()
        let tokenEqual = messenger.observe(equalTo: 3) { equal.append($0) }
        let tokenEven = messenger.observe(where: { $0 % 2 == 0 }) { even.append($0) }
        let objectEqual = RecordingObserver()
        let objectOdd = RecordingObserver()
        messenger.add(objectEqual, equalTo: 4)
        messenger.add(objectOdd, where: { $0 % 2 == 1 })
        for value in 1...6 { messenger.send(value) }
        #expect(equal.values == [3])
        #expect(even.values == [2, 4, 6])
        #expect(objectEqual.recorder.values == [4])
        #expect(objectOdd.recorder.values == [1, 3, 5])
        _ = (tokenEqual, tokenEven)
    }

    // MARK: no echo

    @Test("a sender is not notified of its own message")
    func noEcho() {
        let messenger = Messenger<Int>()
        let sender = RecordingObserver()
        let other = RecordingObserver()
        messenger.add(sender)
        messenger.add(other)
        messenger.send(1, from: sender)
        #expect(sender.recorder.values == [])
        #expect(other.recorder.values == [1])

        let fromClosure = Recorder<Int>()
        let token = messenger.observe { fromClosure.append($0) }
        messenger.send(2, from: token)
        #expect(fromClosure.values == [])
        #expect(sender.recorder.values == [2])
    }

    // MARK: async

    @Test("messages as an AsyncSequence, registered from the moment it is made, removed once nobody holds it")
    func asyncSequence() async {
        let messenger = Messenger<Int>()
        let consumer: Task<[Int], Never>
        do {
            let stream = messenger.messages
            #expect(messenger.observerCount == 1)
            consumer = Task {
                var seen: [Int] = []
                for await value in stream {
                    seen.append(value)
                    if seen.count == 3 { break }
                }
                return seen
            }
        }
        for value in 1...3 { messenger.send(value) }
        #expect(await consumer.value == [1, 2, 3])
        #expect(messenger.observerCount == 0, "the sequence and its iterator are gone, so is the observer")
    }

    @Test("cancelling the consuming task removes the observer")
    func asyncCancellation() async {
        let messenger = Messenger<Int>()
        let stream = messenger.messages
        let first = Messenger<Int>()  // tells the test that the consumer is inside the loop
        let started = first.messages
        let consumer = Task {
            var count = 0
            for await _ in stream {
                count += 1
                first.send(count)
            }
            return count
        }
        messenger.send(1)
        for await _ in started { break }
        consumer.cancel()
        #expect(await consumer.value == 1)
        #expect(messenger.observerCount == 0)
    }

    @Test("a filtered AsyncSequence, and one that finishes when the messenger goes away")
    func asyncFilteredAndFinished() async {
        var messenger: Messenger<Int>? = Messenger<Int>()
        let stream = messenger!.messages(where: { $0 > 1 })
        messenger!.send(1)
        messenger!.send(2)
        messenger = nil
        var seen: [Int] = []
        for await value in stream { seen.append(value) }
        #expect(seen == [2])
    }

    // MARK: concurrency

    @Test("concurrent sends, adds and removes from many tasks are safe, ordered and never overlap")
    func concurrencyUnderLoad() async {
        let messenger = Messenger<Int>()
        let senders = 8
        let perSender = 5_000
        let permanent = (0..<3).map { _ in RecordingObserver() }
        for observer in permanent { messenger.add(observer) }
        let inside = Atomic<Int>(0)
        let overlapped = Atomic<Bool>(false)
        let guardToken = messenger.observe { _ in
            if inside.add(1, ordering: .acquiringAndReleasing).newValue > 1 {
                overlapped.store(true, ordering: .relaxed)
            }
            inside.subtract(1, ordering: .acquiringAndReleasing)
        }

        await withTaskGroup(of: Void.self) { group in
            for sender in 0..<senders {
                group.addTask {
                    for index in 0..<perSender { messenger.send(sender * 1_000_000 + index) }
                }
            }
            for _ in 0..<4 {
                group.addTask {
                    for round in 0..<1_000 {
                        let observer = RecordingObserver()
                        messenger.add(observer)
                        let token = messenger.observe { _ in }
                        if round % 2 == 0 { messenger.remove(observer) } else { messenger.dispose(observer) }
                        token.cancel()
                    }
                }
            }
        }

        let didOverlap = overlapped.load(ordering: .relaxed)
        #expect(!didOverlap, "observers must never be called concurrently")
        let reference = permanent[0].recorder.values
        #expect(reference.count == senders * perSender)
        for observer in permanent.dropFirst() {
            #expect(observer.recorder.values == reference, "every observer sees one global order")
        }
        for sender in 0..<senders {
            let own = reference.filter { $0 / 1_000_000 == sender }
            #expect(own == (0..<perSender).map { sender * 1_000_000 + $0 }, "each sender's messages stay in order")
        }
        messenger.send(-1)
        #expect(messenger.observerCount == permanent.count + 1, "churned registrations are all gone")
        _ = guardToken
    }
}
