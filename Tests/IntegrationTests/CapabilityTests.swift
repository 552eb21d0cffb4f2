import Foundation
import NotifyBus
import NotifyCenter
import Synchronization
import Testing

/// A center that hears its own posts (as a messenger's observers hear its sends) and one that posts, on a daemon of
/// their own, for the length of `body`.
nonisolated(nonsending) private func withCenters(_ body: (_ center: NotifyCenter, _ poster: NotifyCenter) async throws -> Void) async throws {
    let directory = try TemporaryDirectory()
    let daemon = try await TestDaemon.start(in: directory)
    let center = try await NotifyCenter.connect(to: daemon.socketPath, receivesOwnPosts: true)
    let poster = try await NotifyCenter.connect(to: daemon.socketPath)
    try await body(center, poster)
    await center.close()
    await poster.close()
    _ = try await daemon.stop()
}

/// One test per row of the capability table in docs/library.md: each capability of the observer patterns the
/// library comes from, on a `Messenger` and on a `NotifyCenter` (through a real notifyd), side by side.
@Suite("Capabilities: Messenger and NotifyCenter side by side", .timeLimit(.minutes(10)))
struct CapabilityTests {
    @Test("object observers, held weakly, added and removed")
    func objectObservers() async throws {
        let messenger = Messenger<Level>()
        var observer: LevelWatcher? = LevelWatcher()
        let levels = observer!.seen
        messenger.add(observer!)
        messenger.send(Level(value: 1))
        #expect(messenger.remove(observer!))
        messenger.send(Level(value: 2))
        messenger.add(observer!)
        messenger.dispose(observer!)
        messenger.send(Level(value: 2))
        messenger.add(observer!)
        observer = nil
        messenger.send(Level(value: 3))
        #expect(levels.all == [1] && messenger.observerCount == 0, "removed, disposed, then gone with its object")

        try await withCenters { center, poster in
            var observer: LevelWatcher? = LevelWatcher()
            let levels = observer!.seen
            try await center.add(observer!)
            try await poster.post(Level(value: 1))
            try await levels.wait(for: [1])
            #expect(center.remove(observer!))
            try await center.add(observer!)
            center.dispose(observer!)
            #expect(center.observerCount == 0, "dispose is remove on a center")
            try await center.add(observer!)
            observer = nil
            #expect(center.observerCount == 0, "gone with its object")
            // A marker observer added after them is handed each message after them: nothing reached them.
            let marker = Seen()
            let markerToken = try await center.observe(Level.self) { marker.append($0.value.value) }
            try await poster.post(Level(value: 3))
            try await marker.wait("3") { $0.last == 3 }
            #expect(levels.all == [1])
            _ = markerToken
        }
    }

    @Test("closures kept by their owner, handed to them")
    func ownerKeptClosures() async throws {
        let messenger = Messenger<Level>()
        var owner: SeenOwner? = SeenOwner()
        let levels = owner!.seen
        messenger.observe(owner: owner!) { owner, level in owner.seen.append(level.value) }
        messenger.send(Level(value: 1))
        owner = nil
        messenger.send(Level(value: 2))
        #expect(levels.all == [1])

        try await withCenters { center, poster in
            var owner: SeenOwner? = SeenOwner()
            let levels = owner!.seen
            try await center.observe(Level.self, owner: owner!) { owner, received in owner.seen.append(received.value.value) }
            // The form whose handler is not handed its owner, as a messenger has it too.
            let alsoSeen = Seen()
            try await center.observe(Level.self, owner: owner!) { alsoSeen.append($0.value.value) }
            try await poster.post(Level(value: 1))
            try await levels.wait(for: [1])
            try await alsoSeen.wait(for: [1])
            owner = nil
            #expect(center.observerCount == 0)
            let marker = Seen()
            let markerToken = try await center.observe(Level.self) { marker.append($0.value.value) }
            try await poster.post(Level(value: 2))
            try await marker.wait("2") { $0.last == 2 }
            #expect(levels.all == [1] && alsoSeen.all == [1], "nothing after its owner went")
            _ = markerToken
        }
    }

    @Test("closures kept by a token, cancelled or removed")
    func tokens() async throws {
        let messenger = Messenger<Level>()
        let levels = Seen()
        let token = messenger.observe { levels.append($0.value) }
        messenger.send(Level(value: 1))
        #expect(messenger.remove(token) && token.isCancelled)
        messenger.send(Level(value: 2))
        #expect(levels.all == [1])

        try await withCenters { center, poster in
            let levels = Seen()
            let token = try await center.observe(Level.self) { levels.append($0.value.value) }
            let cancelled = Seen()
            let cancelledToken = try await center.observe(Level.self) { cancelled.append($0.value.value) }
            try await poster.post(Level(value: 1))
            try await levels.wait(for: [1])
            try await cancelled.wait(for: [1])
            #expect(center.remove(token) && token.isCancelled)
            #expect(!center.remove(token), "an observation already ended had nothing to stop")
            cancelledToken.cancel()
            #expect(!center.remove(cancelledToken), "cancelled: ended")
            let marker = Seen()
            let markerToken = try await center.observe(Level.self) { marker.append($0.value.value) }
            try await poster.post(Level(value: 2))
            try await marker.wait("2") { $0.last == 2 }
            #expect(levels.all == [1] && cancelled.all == [1])
            _ = markerToken
        }
    }

    @Test("select by value and by predicate")
    func selection() async throws {
        let messenger = Messenger<Level>()
        let equal = Seen()
        let above = Seen()
        let equalToken = messenger.observe(equalTo: Level(value: 2)) { equal.append($0.value) }
        let aboveToken = messenger.observe(where: { $0.value > 2 }) { above.append($0.value) }
        let equalObject = LevelWatcher()
        messenger.add(equalObject, equalTo: Level(value: 3))
        for value in 1...4 { messenger.send(Level(value: value)) }
        #expect(equal.all == [2] && above.all == [3, 4] && equalObject.seen.all == [3])
        _ = (equalToken, aboveToken)

        try await withCenters { center, poster in
            let equal = Seen()
            let above = Seen()
            let equalToken = try await center.observe(Level.self, equalTo: Level(value: 2)) { equal.append($0.value.value) }
            let aboveToken = try await center.observe(Level.self, where: { $0.value > 2 }) { above.append($0.value.value) }
            let equalObject = LevelWatcher()
            try await center.add(equalObject, equalTo: Level(value: 3))
            for value in 1...4 { try await poster.post(Level(value: value)) }
            try await above.wait(for: [3, 4])
            try await equalObject.seen.wait(for: [3])
            #expect(equal.all == [2])
            _ = (equalToken, aboveToken)
        }
    }

    @Test("no echo to the sender")
    func noEcho() async throws {
        let messenger = Messenger<Level>()
        let sender = LevelWatcher()
        let other = LevelWatcher()
        messenger.add(sender)
        messenger.add(other)
        messenger.send(Level(value: 1), from: sender)
        #expect(sender.seen.all.isEmpty && other.seen.all == [1])

        try await withCenters { center, _ in
            let sender = LevelWatcher()
            let other = LevelWatcher()
            try await center.add(sender)
            try await center.add(other)
            try await center.post(Level(value: 1), from: sender)
            try await center.post(Level(value: 2))
            try await sender.seen.wait(for: [2])
            try await other.seen.wait(for: [1, 2])
        }
    }

    @Test("the latest, with an initial value")
    func latestWithInitialValue() async throws {
        let messenger = Messenger(latest: Level(value: 0))
        let levels = Seen()
        let token = messenger.observe(latestFirst: true) { levels.append($0.value) }
        messenger.send(Level(value: 1))
        #expect(levels.all == [0, 1] && messenger.latest == Level(value: 1))
        _ = token

        try await withCenters { center, poster in
            let channel = center.channel(for: Level.self, initial: Level(value: 0))
            #expect(try await channel.latest == Level(value: 0))
            let levels = Seen()
            let token = try await channel.observe(latestFirst: true) { levels.append($0.value) }
            try await poster.post(Level(value: 1))
            try await levels.wait(for: [0, 1])
            #expect(try await channel.latest == Level(value: 1))
            #expect(try await center.latest(Level.self)?.value == Level(value: 1))
            _ = token
        }
    }

    @Test("send the latest again")
    func sendLatestAgain() async throws {
        let messenger = Messenger<Level>()
        let levels = Seen()
        let token = messenger.observe { levels.append($0.value) }
        messenger.send(Level(value: 1))
        #expect(messenger.sendLatest())
        #expect(levels.all == [1, 1])
        _ = token

        try await withCenters { center, poster in
            let levels = Seen()
            let token = try await center.observe(Level.self) { levels.append($0.value.value) }
            try await poster.post(Level(value: 1))
            #expect(try await center.sendLatest(Level.self))
            try await levels.wait(for: [1, 1])
            _ = token
        }
    }

    @Test("reset the latest without sending")
    func resetWithoutSending() async throws {
        let messenger = Messenger<Level>()
        let levels = Seen()
        let token = messenger.observe { levels.append($0.value) }
        messenger.send(Level(value: 1))
        messenger.clear()
        #expect(messenger.latest == nil && levels.all == [1])
        _ = token

        try await withCenters { center, poster in
            let levels = Seen()
            let token = try await center.observe(Level.self) { levels.append($0.value.value) }
            try await poster.post(Level(value: 1))
            try await levels.wait(for: [1])
            try await center.clear(Level.self)
            #expect(try await center.latest(Level.self) == nil)
            try await poster.post(Level(value: 2))
            try await levels.wait(for: [1, 2])
            _ = token
        }
    }

    @Test("the asynchronous sequence, and finish")
    func asyncSequence() async throws {
        let messenger = Messenger<Level>()
        let stream = messenger.messages
        messenger.send(Level(value: 1))
        messenger.finish()
        var taken: [Int] = []
        for await level in stream { taken.append(level.value) }
        #expect(taken == [1])

        try await withCenters { center, poster in
            let sequence = try await center.messages(of: Level.self)
            let levels = Seen()
            let reading = Task {
                for try await received in sequence.values { levels.append(received.value.value) }
            }
            try await poster.post(Level(value: 1))
            try await levels.wait(for: [1])
            center.finish()
            try await withDeadline(.seconds(60), waitingFor: "the sequence to end") { try await reading.value }
            #expect(levels.all == [1])
        }
    }

    @Test("main-actor delivery")
    @MainActor
    func mainActorDelivery() async throws {
        let messenger = Messenger<Level>()
        let model = LevelModel()
        messenger.add(model)
        let closure = LevelModel()
        let token = messenger.observeOnMainActor { closure.show($0) }
        messenger.send(Level(value: 1))
        #expect(model.levels == [1] && closure.levels == [1], "sent on the main actor: before send returned")
        _ = token

        try await withCenters { center, poster in
            let model = LevelModel()
            try await center.add(model)
            let closure = LevelModel()
            let token = try await center.observeOnMainActor(Level.self) { closure.show($0.value) }
            try await poster.post(Level(value: 1))
            try await model.waitFor(1)
            try await closure.waitFor(1)
            #expect(model.levels == [1] && closure.levels == [1])
            _ = token
        }
    }

    @Test("async handlers, in order")
    func asyncHandlers() async throws {
        let messenger = Messenger<Level>()
        let levels = Seen()
        let token = messenger.observe { level async in
            await Task.yield()
            levels.append(level.value)
        }
        for value in 1...50 { messenger.send(Level(value: value)) }
        try await levels.wait(for: Array(1...50))
        _ = token

        try await withCenters { center, poster in
            let levels = Seen()
            let token = try await center.observe(Level.self) { received async in
                await Task.yield()
                levels.append(received.value.value)
            }
            for value in 1...50 { try await poster.post(Level(value: value)) }
            try await levels.wait(for: Array(1...50))
            _ = token
        }
    }
}
