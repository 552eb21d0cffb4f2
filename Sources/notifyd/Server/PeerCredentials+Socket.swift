import NIOCore
import NotifyBus

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Linux's `struct ucred`, which Swift's Glibc module does not import (it is guarded by `_GNU_SOURCE`).
private struct KernelCredentials: Sendable {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0
}

extension PeerCredentials {
    /// Reads the connected peer's pid, uid and gid from the kernel (`SO_PEERCRED`). Called on the channel's event
    /// loop, where NIO answers at once.
    static func ofPeer(of channel: any Channel) throws -> PeerCredentials {
        guard let provider = channel as? any SocketOptionProvider else {
            throw SocketFileError(description: "the channel has no socket options")
        }
        let future: EventLoopFuture<KernelCredentials> = provider.unsafeGetSocketOption(
            level: SocketOptionLevel(SOL_SOCKET),
            name: SocketOptionName(SO_PEERCRED)
        )
        var result: Result<KernelCredentials, any Error>?
        future.assumeIsolated().whenComplete { result = $0 }
        guard let credentials = try result?.get() else {
            throw SocketFileError(description: "SO_PEERCRED did not answer on the event loop")
        }
        return PeerCredentials(pid: credentials.pid, uid: credentials.uid, gid: credentials.gid)
    }
}
