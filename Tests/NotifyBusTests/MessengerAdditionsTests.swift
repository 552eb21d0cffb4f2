import Foundation
import NotifyBus
import Synchronization
import Testing

/// What the in-process `Messenger` gained beside the connected center: a current value, observers of one sender,
/// tokens kept in a set, main-actor observers, and a bounded, finishable stream.
@Suite("Messenger: current value, senders, tokens, main actor, streams", .timeLimit(.minutes(3)))
struct MessengerAdditionsTests {
    @Test("an observer kept by its owner's life: called while the owner exists, gone once it is, ended sooner by remove(owner)")
    func ownerKeptObserver() {
        final class Owner {}
        let messenger = Messenger<Int>()
        var owner: Owner? = Owner()
        let received = Recorder<Int>()
        messenger.observe(owner: owner!) { received.append($0) }
        messenger.send(1)
        #expect(received.values == [1] && messenger.observerCount == 1, "no token to hold: the owner keeps it")
        owner = nil
        messenger.send(2)
        #expect(received.values == [1], "not called once its owner is gone")
        #expect(messenger.observerCount == 0, "and dropped before that send went out")

        let other = Owner()
        let latest = Recorder<Int>()
        messenger.observe(owner: other, latestFirst: true, where: { $0 > 2 }) { latest.append($0) }
        messenger.send(3)
        messenger.send(1)
        #expect(latest.values == [3], "selected as other observers are; the latest (2) was not wanted")
        #expect(messenger.remove(other))
        messenger.send(4)
        #expect(latest.values == [3] && messenger.observerCount == 0)
    }

    @Test("sendLatest sends the buffered message again to every observer but its sender; nothing while none is buffered")
    func sendLatestAgain() {
        let messenger = Messenger<Int>()
        let received = Recorder<Int>()
        let token = messenger.observe { received.append($0) }
        #expect(!messenger.sendLatest(), "nothing buffered yet")
        #expect(received.values.isEmpty)
        let sender = RecordingObserver()
        messenger.add(sender)
        messenger.send(7, from: sender)
        #expect(messenger.sendLatest())
        #expect(received.values == [7, 7], "once more")
        #expect(sender.recorder.values.isEmpty, "its sender does not hear it, now as then")
        messenger.clear()
        #expect(!messenger.sendLatest() && received.values == [7, 7])
        token.cancel()
    }

    @Test("a second registration of one owner that starts with the latest gets it alone: the first, added before, does not get it again")
    func latestFirstToOneRegistration() {
        final class Owner {}
        let messenger = Messenger<Int>()
        let owner = Owner()
        messenger.send(1)
        let first = Recorder<Int>()
        let second = Recorder<Int>()
        messenger.observe(owner: owner) { first.append($0) }
        messenger.observe(owner: owner, latestFirst: true) { second.append($0) }
        messenger.send(2)
        #expect(first.values == [2], "added after 1 was sent, and not the one that asked for the latest")
        #expect(second.values == [1, 2])

        let observer = RecordingObserver()
        messenger.add(observer)
        messenger.add(observer, latestFirst: true)
        messenger.send(3)
        #expect(observer.recorder.values == [2, 3, 3], "the latest once, to the registration that asked; then 3 to both")
    }

    @Test("sendLatest racing send from another thread never sends an older value after a newer one, and latest never goes back")
    func sendLatestRacingSend() {
        let messenger = Messenger<Int>()
        let received = Recorder<Int>()
        let token = messenger.observe { received.append($0) }
        let count = 200_000
        // Two threads at once, each waiting for the other to start: one sends 1, 2, 3, …, the other sends the latest
        // again and again.
        let started = Atomic<Int>(0)
        let done = DispatchGroup()
        for thread in 0..<2 {
            done.enter()
            Thread.detachNewThread {
                started.add(1, ordering: .relaxed)
                while started.load(ordering: .relaxed) < 2 {}
                if thread == 0 {
                    for value in 1...count { messenger.send(value) }
                } else {
                    for _ in 1...count { messenger.sendLatest() }
                }
                done.leave()
            }
        }
        done.wait()
        let values = received.values
        let wentBack = zip(values, values.dropFirst()).first { $0.1 < $0.0 }
        #expect(wentBack == nil, "an older value after a newer one: \(String(describing: wentBack))")
        #expect(messenger.latest == count)
        token.cancel()
    }

    @Test("a current value: latest from the start, handed first to observers that start with it, before what follows")
    func currentValue() {
        let level = Messenger<Int>(latest: 5)
        #expect(level.latest == 5)
        let received = Recorder<Int>()
        let token = level.observe(latestFirst: true) { received.append($0) }
        #expect(received.values == [5], "handed at once")
        level.send(6)
        #expect(received.values == [5, 6])
        let plain = Recorder<Int>()
        let plainToken = level.observe { plain.append($0) }
        let object = RecordingObserver()
        level.add(object, latestFirst: true)
        #expect(object.recorder.values == [6])
        level.send(7)
        #expect(plain.values == [7], "without latestFirst, only what is sent after")
        #expect(received.values == [5, 6, 7] && object.recorder.values == [6, 7])
        level.clear()
        let none = Recorder<Int>()
        let noneToken = level.observe(latestFirst: true) { none.append($0) }
        #expect(none.values.isEmpty)
        _ = (token, plainToken, noneToken)
    }

    @Test("starting with the latest from inside an observer: the latest comes after the message being delivered, before the next")
    func currentValueWhileDelivering() {
        let messenger = Messenger<Int>()
        let late = Recorder<Int>()
        let tokens = Mutex<[ObservationToken]>([])
        let first = messenger.observe { message in
            guard message == 1 else { return }
            let token = messenger.observe(latestFirst: true) { late.append($0) }
            tokens.withLock { $0.append(token) }
            messenger.send(2)
        }
        messenger.send(1)
        #expect(late.values == [1, 2])
        _ = first
    }

    @Test("observers of one sender get only what it sends (NotificationCenter's object:), its latest included")
    func oneSender() {
        let messenger = Messenger<String>()
        let alice = ObservationToken(onCancel: {})
        let bob = ObservationToken(onCancel: {})
        let fromAlice = Recorder<String>()
        let token = messenger.observe(from: alice) { fromAlice.append($0) }
        messenger.send("a1", from: alice)
        messenger.send("b1", from: bob)
        messenger.send("anonymous")
        messenger.send("a2", from: alice)
        #expect(fromAlice.values == ["a1", "a2"])
        messenger.send("a3", from: alice)
        let later = Recorder<String>()
        let laterToken = messenger.observe(latestFirst: true, from: alice) { later.append($0) }
        #expect(later.values == ["a3"])
        messenger.send("b2", from: bob)
        let none = Recorder<String>()
        let noneToken = messenger.observe(latestFirst: true, from: alice) { none.append($0) }
        #expect(none.values.isEmpty, "the latest is bob's")
        _ = (token, laterToken, noneToken)
    }

    @Test("tokens are Hashable by identity and live in a set: emptying it stops the observers")
    func tokensInASet() {
        let messenger = Messenger<Int>()
        let received = Recorder<Int>()
        var tokens = Set<ObservationToken>()
        messenger.observe { received.append($0) }.store(in: &tokens)
        messenger.observe { received.append($0 * 10) }.store(in: &tokens)
        #expect(tokens.count == 2)
        messenger.send(1)
        #expect(received.values.sorted() == [1, 10])
        tokens.removeAll()
        messenger.send(2)
        #expect(received.values.count == 2)
        #expect(messenger.observerCount == 0)
    }

    @Test("a main-actor observer is called on the main actor, in order")
    func mainActor() async throws {
        let messenger = Messenger<Int>()
        let (done, finished) = AsyncStream.makeStream(of: [Int].self)
        let seen = Mutex<[Int]>([])
        let token = messenger.observeOnMainActor { message in
            MainActor.assertIsolated()
            let all = seen.withLock { $0.append(message); return $0 }
            if message == 100 { finished.yield(all) }
        }
        for message in 1...100 { messenger.send(message) }
        var iterator = done.makeAsyncIterator()
        #expect(await iterator.next() == Array(1...100))
        token.cancel()
    }

    @Test("a main-actor observer's token names it: send(_:from:) leaves it out, remove stops it")
    func mainActorToken() async throws {
        let messenger = Messenger<Int>()
        let (seen, tick) = AsyncStream.makeStream(of: Int.self)
        let token = messenger.observeOnMainActor { tick.yield($0) }
        messenger.send(1, from: token)
        messenger.send(2)
        var iterator = seen.makeAsyncIterator()
        #expect(await iterator.next() == 2, "its own message is left out")
        #expect(messenger.remove(token))
        #expect(token.isCancelled)
        messenger.send(3)
        let all = Recorder<Int>()
        let other = messenger.observeOnMainActor { all.append($0) }
        let (done, finished) = AsyncStream.makeStream(of: Void.self)
        let marker = messenger.observeOnMainActor { if $0 == 4 { finished.yield() } }
        messenger.send(4)
        var doneIterator = done.makeAsyncIterator()
        _ = await doneIterator.next()
        tick.finish()
        #expect(await iterator.next() == nil, "nothing after remove")
        _ = (other, marker)
    }

    @Test("a bounded stream drops past its bound and counts what it dropped; finish() ends every stream, now and later")
    func boundedAndFinished() async {
        let messenger = Messenger<Int>()
        let stream = messenger.messages(bufferingPolicy: .bufferingNewest(3))
        for message in 1...10 { messenger.send(message) }
        #expect(messenger.droppedCount == 7)
        messenger.finish()
        var taken: [Int] = []
        for await message in stream { taken.append(message) }
        #expect(taken == [8, 9, 10], "what it held, then the end")
        var after: [Int] = []
        for await message in messenger.messages { after.append(message) }
        #expect(after.isEmpty, "a stream asked for after finish() ends at once")
        let observed = Recorder<Int>()
        let token = messenger.observe { observed.append($0) }
        messenger.send(11)
        #expect(observed.values == [11], "closure observers go on")
        _ = token
    }

    @Test("droppedCount is one total for all of a messenger's bounded buffers, as its documentation says")
    func droppedCountIsOneTotal() async {
        let messenger = Messenger<Int>()
        let few = messenger.messages(bufferingPolicy: .bufferingNewest(2))
        let more = messenger.messages(bufferingPolicy: .bufferingOldest(5))
        for message in 1...10 { messenger.send(message) }
        #expect(messenger.droppedCount == 8 + 5, "8 dropped by the first, 5 by the second")
        messenger.finish()
        var taken: [[Int]] = []
        for stream in [few, more] {
            var mine: [Int] = []
            for await message in stream { mine.append(message) }
            taken.append(mine)
        }
        #expect(taken == [[9, 10], [1, 2, 3, 4, 5]])
    }

    @Test("the stream can start with the latest")
    func streamStartingWithLatest() async {
        let messenger = Messenger<Int>(latest: 1)
        let stream = messenger.messages(latestFirst: true)
        messenger.send(2)
        messenger.finish()
        var taken: [Int] = []
        for await message in stream { taken.append(message) }
        #expect(taken == [1, 2])
    }
}
