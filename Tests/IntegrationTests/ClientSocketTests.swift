import Foundation
import NotifyBus
import Testing

@Suite("The client library's socket", .timeLimit(.minutes(10)))
struct ClientSocketTests {
    @Test("a NotifyClient's connection is closed on exec, so a program's children never hold it open")
    func closedOnExec() async throws {
        let daemon = try await TestDaemon.start()
        let client = try await daemon.client()
        // Its descriptor is the one whose peer is the daemon's socket (tests running beside it have other daemons).
        let descriptors = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").compactMap { Int32($0) }
        let connections = descriptors.filter { Self.peerPath(of: $0) == daemon.socketPath }
        #expect(connections.count == 1, "the client's connection is found: \(connections)")
        for descriptor in connections {
            #expect(fcntl(descriptor, F_GETFD) & FD_CLOEXEC != 0)
        }
        await client.close()
        try await daemon.stop()
    }

    /// The path of the Unix socket `descriptor` is connected to; nil if it is no connected Unix socket.
    private static func peerPath(of descriptor: Int32) -> String? {
        var address = sockaddr_un()
        var length = socklen_t(MemoryLayout<sockaddr_un>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(descriptor, $0, &length) == 0 }
        }
        guard named, address.sun_family == sa_family_t(AF_UNIX) else { return nil }
        return withUnsafeBytes(of: address.sun_path) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    }
}
