import Foundation
import NotifyBus
import Testing

/// The default access policy on a real daemon, driven by `notify` as other users (`setpriv`; root only, as in CI).
@Suite("Access by Unix identity on a real notifyd")
struct AccessTests {
    @Test("system topics are published by root only (77 otherwise), user.<uid> topics are private", .enabled(if: getuid() == 0))
    func defaultPolicy() async throws {
        let daemon = try await TestDaemon.start()
        chmod(daemon.directory.path, 0o755)
        let listener = try await daemon.client()
        let subscription = try await listener.subscribe(to: [TopicPattern(">")])
        var deliveries = subscription.messages.makeAsyncIterator()

        let denied = try await notifyAs(uid: 65534, ["send", "system.backup", "forged"], socket: daemon.socketPath)
        #expect(denied.status == 77, "stderr: \(denied.stderr)")
        #expect(denied.stderr.contains("system topics are published only by root"))
        #expect(try await daemon.notify(["latest", "system.backup"]).status == 1, "nothing was buffered")

        #expect(try await daemon.notify(["send", "system.backup", "done"]).status == 0)
        let first = try #require(try await deliveries.next())
        #expect(first.topic.name == "system.backup" && first.text == "done", "the listener saw root's message, not the forged one")
        let read = try await notifyAs(uid: 65534, ["latest", "system.backup"], socket: daemon.socketPath)
        #expect(read.status == 0 && String(decoding: read.stdout, as: UTF8.self) == "done\n", "everyone reads system topics")

        let own = try await notifyAs(uid: 65534, ["send", "user.65534.mood", "fine"], socket: daemon.socketPath)
        #expect(own.status == 0, "stderr: \(own.stderr)")
        let second = try #require(try await deliveries.next())
        #expect(second.topic.name == "user.65534.mood", "root's wildcard receives every user's topics")
        let stranger = try await notifyAs(uid: 1000, ["latest", "user.65534.mood"], socket: daemon.socketPath)
        #expect(stranger.status == 77, "another user may not read it: \(stranger.stderr)")
        let intruder = try await notifyAs(uid: 1000, ["send", "user.65534.mood", "bad"], socket: daemon.socketPath)
        #expect(intruder.status == 77)
        let owner = try await notifyAs(uid: 65534, ["latest", "user.65534.mood"], socket: daemon.socketPath)
        #expect(String(decoding: owner.stdout, as: UTF8.self) == "fine\n", "the forged write changed nothing")
        await listener.close()
        #expect(try await daemon.stop() == 0)
    }
}
