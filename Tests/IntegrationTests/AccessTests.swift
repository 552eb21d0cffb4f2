import Foundation
import NotifyBus
import Testing

/// The default access policy on a real daemon, driven by `notify` as other users (`setpriv`; root only, as in CI).
@Suite("Access by Unix identity on a real notifyd", .timeLimit(.minutes(10)))
struct AccessTests {
    @Test("in the /tmp fallback, a daemon of another user is refused even where the directories are the caller's", .enabled(if: getuid() == 0))
    func fallbackPeerOfAnotherUser() async throws {
        // nobody's daemon, its socket then moved into root's own private fallback directory: the directory checks
        // pass, and only the kernel's word on who listens tells.
        let theirs = try TemporaryDirectory()
        chown(theirs.path, 65534, 65534)
        try Data("# empty\n".utf8).write(to: URL(fileURLWithPath: theirs.path + "/notifyd.conf"))
        let impostor = try ChildProcess("/usr/bin/setpriv", [
            "--reuid", "65534", "--regid", "65534", "--clear-groups", Binaries.notifyd,
            "--socket", theirs.path + "/s.sock", "--state-dir", theirs.path + "/state", "--config", theirs.path + "/notifyd.conf",
        ])
        try await impostor.standardError.wait("the other user's daemon to listen") { $0.contains("listening") }
        let fallback = "/tmp/notifyd-0"
        try? FileManager.default.removeItem(atPath: fallback)
        defer { try? FileManager.default.removeItem(atPath: fallback) }
        try FileManager.default.createDirectory(atPath: fallback + "/notifyd", withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        chmod(fallback, 0o700)
        #expect(rename(theirs.path + "/s.sock", fallback + "/notifyd/notifyd.sock") == 0)

        for arguments in [["send", "fb.x", "hi"], ["subscribe", "fb.>", "--count", "1", "--timeout", "5"]] {
            let refused = try await notify(arguments, socket: fallback + "/notifyd/notifyd.sock")
            #expect(refused.status == 77, "\(arguments)")
            #expect(refused.stderr.contains("runs as uid 65534, not as you (uid 0)"), "\(arguments): \(refused.stderr)")
        }
        impostor.signal(SIGTERM)
        _ = try await impostor.exitStatus()
    }

    @Test("system topics are published by root only (77 otherwise), user.<uid> topics are private", .enabled(if: getuid() == 0))
    func defaultPolicy() async throws {
        let daemon = try await TestDaemon.start()
        chmod(daemon.directory.path, 0o755)
        let listener = try await daemon.client()
        let subscription = try await listener.subscribe(to: [TopicPattern(">")])
        let deliveries = TimedMessages(subscription)

        let denied = try await notifyAs(uid: 65534, ["send", "system.backup", "forged"], socket: daemon.socketPath)
        #expect(denied.status == 77, "stderr: \(denied.stderr)")
        #expect(denied.stderr.contains("system topics are published only by root"))
        #expect(try await daemon.notify(["latest", "system.backup"]).status == 1, "nothing was buffered")

        #expect(try await daemon.notify(["send", "system.backup", "done"]).status == 0)
        let first = try #require(try await deliveries.next(waitingFor: "the next message on subscription"))
        #expect(first.topic.name == "system.backup" && first.text == "done", "the listener saw root's message, not the forged one")
        let read = try await notifyAs(uid: 65534, ["latest", "system.backup"], socket: daemon.socketPath)
        #expect(read.status == 0 && String(decoding: read.stdout, as: UTF8.self) == "done\n", "everyone reads system topics")

        let own = try await notifyAs(uid: 65534, ["send", "user.65534.mood", "fine"], socket: daemon.socketPath)
        #expect(own.status == 0, "stderr: \(own.stderr)")
        let second = try #require(try await deliveries.next(waitingFor: "the next message on subscription"))
        #expect(second.topic.name == "user.65534.mood", "root's wildcard receives every user's topics")
        let stranger = try await notifyAs(uid: 1000, ["latest", "user.65534.mood"], socket: daemon.socketPath)
        #expect(stranger.status == 77, "another user may not read it: \(stranger.stderr)")
        let eavesdropper = try await notifyAs(uid: 1000, ["subscribe", "user.65534.mood", "--count", "1"], socket: daemon.socketPath)
        #expect(eavesdropper.status == 77, "nor subscribe to it by name: \(eavesdropper.stderr)")
        let intruder = try await notifyAs(uid: 1000, ["send", "user.65534.mood", "bad"], socket: daemon.socketPath)
        #expect(intruder.status == 77)
        let owner = try await notifyAs(uid: 65534, ["latest", "user.65534.mood"], socket: daemon.socketPath)
        #expect(String(decoding: owner.stdout, as: UTF8.self) == "fine\n", "the forged write changed nothing")
        await listener.close()
        #expect(try await daemon.stop() == 0)
    }

    @Test(
        "rules: a group rule admits a member (supplementary or primary) and refuses others; explain names the rule; SIGHUP applies a new policy, and a bad one leaves the old in force",
        .enabled(if: getuid() == 0)
    )
    func configuredRules() async throws {
        let directory = try TemporaryDirectory()
        chmod(directory.path, 0o755)
        try """
            [rules]
            backup-writers = allow publish backup.> group:4242
            backup-others = deny publish backup.> everyone
            """.write(toFile: directory.path + "/notifyd.conf", atomically: true, encoding: .utf8)
        let daemon = try await TestDaemon.start(in: directory)
        let socket = daemon.socketPath

        let member = try await notifyAs(uid: 1000, groups: [4242], ["send", "backup.done", "by-member"], socket: socket)
        #expect(member.status == 0, "a supplementary group counts: \(member.stderr)")
        let primary = try await notifyAs(uid: 1002, gid: 4242, ["send", "backup.done", "by-primary"], socket: socket)
        #expect(primary.status == 0, "the primary group counts: \(primary.stderr)")
        let other = try await notifyAs(uid: 1001, groups: [4243], ["send", "backup.done", "by-other"], socket: socket)
        #expect(other.status == 77)
        // Named, not quoted: the rule's text would tell another user whom the administrator's rules are about.
        #expect(other.stderr.contains("rule backup-others (line 3) of the daemon's configuration"), "stderr: \(other.stderr)")
        #expect(!other.stderr.contains("group:"), "stderr: \(other.stderr)")
        #expect(try await daemon.notify(["latest", "backup.done"]).output == "by-primary\n", "the refused publish was not kept")

        let explained = try await notifyAs(uid: 1001, ["explain", "backup.x"], socket: socket)
        #expect(explained.status == 0)
        #expect(
            String(decoding: explained.stdout, as: UTF8.self) == """
                publish: denied for uid 1001, by rule backup-others (line 3) of the daemon's configuration
                read: allowed for uid 1001, by topics outside $, user.<uid> and system are open to every local user

                """
        )
        let nosy = try await notifyAs(uid: 1001, ["explain", "backup.x", "--uid", "1000"], socket: socket)
        #expect(nosy.status == 77, "only root asks about others: \(nosy.stderr)")
        let rootSees = try await daemon.notify(["explain", "backup.x", "--uid", "1001"])
        #expect(rootSees.output.contains("by rule backup-others (line 3): deny publish backup.> everyone"), "root sees the text")
        let asRoot = try await daemon.notify(["explain", "user.1000.x", "--uid", "1001", "--format", "json"])
        #expect(asRoot.output.contains(#""uid":1001"#) && asRoot.output.contains(#""read":false"#), "\(asRoot.output)")

        // A new policy: now uid 1000 is refused, and everyone else is open again. A subscriber connected before the
        // reload stays connected and gets what the new policy lets through.
        let listener = try await daemon.client()
        let subscription = try await listener.subscribe(to: [TopicPattern("backup.>")])
        let deliveries = TimedMessages(subscription)
        try "[rules]\nno-1000 = deny publish backup.> user:1000\n".write(toFile: daemon.configurationPath, atomically: true, encoding: .utf8)
        daemon.child.signal(SIGHUP)
        try await daemon.child.standardError.wait("the reload") { $0.contains("configuration reloaded") }
        #expect(try await notifyAs(uid: 1001, ["send", "backup.done", "after-reload"], socket: socket).status == 0)
        #expect(try await deliveries.next(waitingFor: "the next message on subscription")?.text == "after-reload", "the connection made before the reload still receives")
        #expect(try await notifyAs(uid: 1000, groups: [4242], ["send", "backup.done", "x"], socket: socket).status == 77)

        // A rule naming a group that does not exist: the reload is refused with the line, and the policy stays.
        try "[rules]\nopen = allow publish backup.> everyone\nbroken = allow read backup.> group:no-such-group-here\n"
            .write(toFile: daemon.configurationPath, atomically: true, encoding: .utf8)
        daemon.child.signal(SIGHUP)
        try await daemon.child.standardError.wait("the refused reload") { $0.contains("configuration not reloaded") }
        #expect(daemon.log.contains("line 3: rule broken: there is no group \"no-such-group-here\""), "log: \(daemon.log)")
        #expect(try await notifyAs(uid: 1000, groups: [4242], ["send", "backup.done", "x"], socket: socket).status == 77)
        await listener.close()
        #expect(try await daemon.stop() == 0)
    }

    @Test("a peer in more groups than the kernel reports (70) is denied by a deny rule for one of them", .enabled(if: getuid() == 0))
    func manyGroupsFailClosed() async throws {
        let directory = try TemporaryDirectory()
        chmod(directory.path, 0o755)
        try "[rules]\nno-secrets = deny read secret.> group:4270\n".write(
            toFile: directory.path + "/notifyd.conf",
            atomically: true,
            encoding: .utf8
        )
        let daemon = try await TestDaemon.start(in: directory)
        #expect(try await daemon.notify(["send", "secret.plans", "x"]).status == 0)
        let few = try await notifyAs(uid: 1000, groups: [4270], ["latest", "secret.plans"], socket: daemon.socketPath)
        #expect(few.status == 77, "a member of the denied group: \(few.stderr)")
        let many = try await notifyAs(uid: 1000, groups: Array(4201...4270), ["latest", "secret.plans"], socket: daemon.socketPath)
        #expect(many.status == 77, "70 groups, the denied one among them: SO_PEERGROUPS cannot tell, so the deny applies: \(many.stderr)")
        let outsider = try await notifyAs(uid: 1000, groups: [4271], ["latest", "secret.plans"], socket: daemon.socketPath)
        #expect(outsider.status == 0, "\(outsider.stderr)")
        try await daemon.stop()
    }
}
