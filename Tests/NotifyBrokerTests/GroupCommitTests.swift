import Testing

@testable import NotifyBroker

/// Group commit's bookkeeping without a log or a broker: who a sync covers.
@Suite("Group commit", .timeLimit(.minutes(1)))
struct GroupCommitTests {
    static func session(_ id: UInt64) -> Session {
        Session(id: id, peer: PeerCredentials(pid: 1, uid: 1000, gid: 1000), account: UserAccount(uid: 1000), transport: DiscardingTransport())
    }

    @Test("one sync at a time: who asked while it ran waits for the next, which covers them all; a write meanwhile asks for it")
    func oneAtATime() {
        var commit = GroupCommit()
        let first = Self.session(1), second = Self.session(2), third = Self.session(3)
        commit.wait([first])
        #expect(commit.begin(canSync: true) == 1)
        // A sync under way began before these were written: they need the next one.
        commit.wait([second, third])
        #expect(commit.begin(canSync: true) == nil, "one sync at a time")
        #expect(commit.end(1, failed: false).map(\.id) == [1], "sync 1 covers only who asked before it began")
        #expect(commit.wantsAnother, "written and waited for meanwhile")
        #expect(second.waitsForSync && !first.waitsForSync)
        #expect(commit.begin(canSync: true) == 2)
        #expect(commit.end(2, failed: false).map(\.id) == [2, 3])
        #expect(commit.isSettled && !commit.wantsAnother)
    }

    @Test("a failed sync withdraws every waiting acknowledgement, also those that waited for a later one")
    func failure() {
        var commit = GroupCommit()
        let first = Self.session(1), second = Self.session(2)
        commit.wait([first])
        #expect(commit.begin(canSync: true) == 1)
        commit.wait([second])
        #expect(commit.end(1, failed: true).map(\.id) == [1, 2])
        #expect(commit.waiters.isEmpty && !second.waitsForSync)
    }

    @Test("a session asking twice waits once, for the later sync; without a log nothing begins; at shutdown all are let go")
    func edges() {
        var commit = GroupCommit()
        let first = Self.session(1)
        commit.wait([first])
        #expect(commit.begin(canSync: false) == nil && commit.started == 0)
        #expect(commit.begin(canSync: true) == 1)
        commit.wait([first])
        #expect(commit.waiters.count == 1 && first.awaitedSync == 2)
        #expect(commit.end(1, failed: false).isEmpty, "it now waits for sync 2")
        #expect(commit.endAll().map(\.id) == [1] && commit.isSettled)
    }
}
