import Foundation
import Testing

@testable import NotifyDaemon

@Suite("The password file, read for the packaged fleet user", .timeLimit(.minutes(1)))
struct PasswordFileTests {
    @Test("a user's uid is read off its line; other users, malformed lines and uids that are not 32-bit numbers are passed over")
    func readsTheUsersLine() {
        let text = """
            root:x:0:0:root:/root:/bin/bash
            notifyd-fleetx:x:5:5::/:/usr/sbin/nologin
            notifyd-fleet:x:4294967296:1::/:/usr/sbin/nologin
            notifyd-fleet:x:-1:1::/:/usr/sbin/nologin
            notifyd-fleet:x
            notifyd-fleet:x:998:998:notifyd fleet:/var/lib/notifyd-fleet:/usr/sbin/nologin
            notifyd-fleet:x:999:999::/:/usr/sbin/nologin

            """
        let contents = Array(text.utf8)
        #expect(PasswordFile.uid(of: "notifyd-fleet", in: contents) == 998, "the first well-formed line of the name")
        #expect(PasswordFile.uid(of: "root", in: contents) == 0)
        #expect(PasswordFile.uid(of: "notifyd", in: contents) == nil, "a prefix of a name is not the name")
        #expect(PasswordFile.uid(of: "nobody", in: contents) == nil)
        #expect(PasswordFile.uid(of: "", in: contents) == nil)
        #expect(PasswordFile.uid(of: "root:x", in: contents) == nil, "a name with a colon matches no line")
        #expect(PasswordFile.uid(of: "notifyd-fleet", in: Array("notifyd-fleet:x:4294967295:0::/:/bin/false".utf8)) == UInt32.max)
    }

    @Test("the file is read from disk; a missing file lists no one")
    func readsTheFile() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("passwd-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(PasswordFile.uid(of: "notifyd-fleet", path: path) == nil)
        // Longer than one read, so the lines that follow the first chunk are found too.
        let filler = (0..<2_000).map { "user\($0):x:\(10_000 + $0):100::/home/user\($0):/bin/sh\n" }.joined()
        #expect(filler.utf8.count > 4 << 10)
        try (filler + "notifyd-fleet:x:997:997::/:/usr/sbin/nologin\n").write(toFile: path, atomically: true, encoding: .utf8)
        #expect(PasswordFile.uid(of: "notifyd-fleet", path: path) == 997)
        #expect(PasswordFile.uid(of: "user1999", path: path) == 11_999)
    }
}
