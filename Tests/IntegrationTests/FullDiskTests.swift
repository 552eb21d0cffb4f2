import Foundation
import NotifyBus
import Testing

/// A real full disk under a real notifyd: an acknowledgement is never given for what its state log does not hold.
/// The disk is a small tmpfs, so the test needs root (as CI has); elsewhere it is skipped.
@Suite("A full disk under a real notifyd", .timeLimit(.minutes(10)))
struct FullDiskTests {
    /// Fills the file system of `directory` with one file, until it takes no more.
    static func fill(_ directory: String) {
        let descriptor = open(directory + "/filler", O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        defer { close(descriptor) }
        let block = [UInt8](repeating: 0, count: 4096)
        while write(descriptor, block, block.count) > 0 {}
    }

    @Test("a full disk: the publish whose write failed gets no OK (exit 75), retained ones are refused, others go; room again, all is well", .enabled(if: getuid() == 0))
    func fullDisk() async throws {
        let directory = try TemporaryDirectory()
        let state = directory.path + "/state"
        mkdir(state, 0o700)
        let mount = try ChildProcess("/bin/mount", ["-t", "tmpfs", "-o", "size=256k", "tmpfs", state])
        try #require(try await mount.exitStatus() == 0, "root may mount a tmpfs here")
        do {
            try await Self.fillAndRecover(directory: directory, state: state)
        } catch {
            _ = try? await ChildProcess("/bin/umount", ["-l", state]).exitStatus()
            throw error
        }
        #expect(try await ChildProcess("/bin/umount", ["-l", state]).exitStatus() == 0)
    }

    static func fillAndRecover(directory: TemporaryDirectory, state: String) async throws {
        let notify = try NotifySocketListener(path: directory.path + "/notify.sock")
        let daemon = try await TestDaemon.start(in: directory, environment: SystemdIntegrationTests.environment(["NOTIFY_SOCKET": notify.path]))
        #expect(try await daemon.notify(["send", "disk.t", "before"]).status == 0)
        Self.fill(state)

        // Larger than a page, so that the log needs a page the disk no longer has (it fills its last one first).
        let large = String(repeating: "x", count: 10_000)
        let failed = try await daemon.notify(["send", "disk.t", large])
        #expect(failed.status == 75, "the acknowledgement was withdrawn: \(failed.stderr)")
        #expect(failed.stderr.contains("could not write its state log"), "\(failed.stderr)")
        let refused = try await daemon.notify(["send", "disk.t", "still-full"])
        #expect(refused.status == 75)
        #expect(refused.stderr.contains("keeps no new buffered messages for now"), "\(refused.stderr)")
        #expect(try await daemon.notify(["send", "disk.t", "passing", "--no-retain"]).status == 0, "delivery goes on")
        // The figures while the log cannot be written: what was published (the one whose write failed included, as
        // it was delivered; not the refused one), one topic holding a buffered message, nothing queued.
        let stats = try await daemon.notify(["stats", "--format", "json"])
        #expect(stats.status == 0)
        let figures = try #require(JSONSerialization.jsonObject(with: Data(stats.stdout)) as? [String: Any], "\(stats.output)")
        #expect(figures["messages_in"] as? Int == 3 && figures["retained"] as? Int == 1 && figures["topics"] as? Int == 1, "\(figures)")
        #expect(figures["queued_bytes"] as? Int == 0, "\(figures)")
        try await daemon.child.standardError.wait("the journal line") { $0.contains("the state could not be saved") }
        let failing = try await notify.wait(for: "STATUS= saying the log fails") { field("STATUS", in: $0)?.contains("STATE LOG FAILING") == true }
        #expect(field("STATUS", in: failing)?.contains("No space left on device") == true, "\(failing)")

        // Room again, and no client comes: the daemon tries again by itself when its pause ends (at most a few
        // seconds after a few failed tries), and the service's status says all is well again.
        unlink(state + "/filler")
        try await daemon.child.standardError.wait(timeout: .seconds(40), "the recovery line") { $0.contains("the state log is written again") }
        try await notify.wait(for: "STATUS= without the failure") { $0.hasPrefix("STATUS=") && !$0.contains("FAILING") }
        #expect(try await daemon.notify(["send", "disk.t", "after"]).status == 0, "retained publishes are accepted again")
        try await daemon.kill()
        let again = try await TestDaemon.start(in: directory)
        #expect(try await again.notify(["latest", "disk.t"]).output == "after\n", "what was acknowledged survived kill -9")
        try await again.stop()
    }
}
