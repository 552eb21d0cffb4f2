import NIOCore
import NotifyProtocol
import NotifyBroker
import NotifySystem

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

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
        let groups = groups(of: provider)
        return PeerCredentials(
            pid: credentials.pid,
            uid: credentials.uid,
            gid: credentials.gid,
            groups: groups ?? [],
            groupsAreKnown: groups != nil
        )
    }

    /// `SO_PEERGROUPS`: the peer's supplementary groups at connect time, as the kernel keeps them (sorted, so a
    /// group 0 can only come first). NIO hands the answer back in a zeroed buffer without its length, so the list
    /// ends at the first 0 after the start. For a peer in more than 64 groups the kernel refuses the answer (ERANGE):
    /// nil, and rules by group fail closed for it.
    private static func groups(of provider: any SocketOptionProvider) -> [UInt32]? {
        let future: EventLoopFuture<SIMD64<UInt32>> = provider.unsafeGetSocketOption(
            level: SocketOptionLevel(SOL_SOCKET),
            name: SocketOptionName(59)  // SO_PEERGROUPS, Linux 4.13; Glibc's module does not export the name
        )
        var result: Result<SIMD64<UInt32>, any Error>?
        future.assumeIsolated().whenComplete { result = $0 }
        guard let answer = try? result?.get() else { return nil }
        var groups: [UInt32] = []
        for index in 0..<answer.scalarCount {
            let gid = answer[index]
            if gid == 0 && index > 0 { break }
            groups.append(gid)
        }
        // [0] alone is either group 0 or no groups at all: read as none, a rule for group 0 applies only to a peer
        // whose primary group it is.
        if groups == [0] { return [] }
        return groups
    }
}
