import Testing

@testable import NotifyBroker
@testable import NotifyProtocol

/// The sessions open and what each uid holds, without a broker.
@Suite("Connection registry", .timeLimit(.minutes(1)))
struct ConnectionRegistryTests {
    static func peer(_ uid: UInt32) -> PeerCredentials { PeerCredentials(pid: 1, uid: uid, gid: uid) }

    @Test("sessions are numbered in order and share one account per uid, let go of once it holds nothing")
    func accounts() {
        var registry = ConnectionRegistry()
        let first = registry.register(peer: Self.peer(1000), transport: DiscardingTransport())
        let second = registry.register(peer: Self.peer(1000), transport: DiscardingTransport())
        let other = registry.register(peer: Self.peer(1001), transport: DiscardingTransport())
        #expect([first.id, second.id, other.id] == [1, 2, 3])
        #expect(first.account === second.account && first.account.connections == 2 && registry.accounts.count == 2)
        registry.forgetIfEmpty(other.account)
        #expect(registry.accounts[1001] != nil, "it still has a connection")
        registry.unregister(other)
        other.account.connections -= 1
        registry.forgetIfEmpty(UserAccount(uid: 1000))
        #expect(registry.accounts[1000] === first.account, "only the account registered for the uid is let go of")
        registry.forgetIfEmpty(other.account)
        #expect(registry.accounts[1001] == nil && registry.open.count == 2)
    }

    @Test("unread bytes are counted per session, per uid and in total, and given back")
    func unread() {
        var registry = ConnectionRegistry()
        let one = registry.register(peer: Self.peer(1000), transport: DiscardingTransport())
        let two = registry.register(peer: Self.peer(1000), transport: DiscardingTransport())
        #expect(registry.holdUnread(300, for: one) == 300)
        #expect(registry.holdUnread(100, for: two) == 100)
        #expect(registry.holdUnread(50, for: one) == -250)
        #expect(one.unreadBytes == 50 && one.account.unreadBytes == 150 && registry.unreadBytesTotal == 150)
        _ = registry.holdUnread(0, for: one)
        _ = registry.holdUnread(0, for: two)
        #expect(registry.unreadBytesTotal == 0 && one.account.unreadBytes == 0)
    }

    @Test("the room a burst of connections left is given back once they are gone")
    func idleCapacity() {
        var registry = ConnectionRegistry()
        let sessions = (0..<500).map { _ in registry.register(peer: Self.peer(1000), transport: DiscardingTransport()) }
        for session in sessions.dropFirst() { registry.unregister(session) }
        registry.releaseIdleCapacity()
        #expect(registry.open.count == 1 && registry.open.capacity < 100)
    }
}
