import NIOCore
import NIOPosix
import NotifyBroker

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The state log's `fsync` under `sync = always`, on a thread of its own: the event loop writes each batch's
/// records and goes on serving every connection while the disk flushes; the acknowledgements that wait for it leave
/// when it is done (see ``StateLogSyncer``).
final class StateLogSyncThread: StateLogSyncer, Sendable {
    private let pool: NIOThreadPool
    private let eventLoop: any EventLoop

    init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
        pool = NIOThreadPool(numberOfThreads: 1)
        pool.start()
    }

    func sync(_ descriptor: CInt, completion: @escaping (CInt?) -> Void) {
        let completion = NIOLoopBound(completion, eventLoop: eventLoop)
        let eventLoop = self.eventLoop
        pool.submit { _ in
            let failure: CInt? = fsync(descriptor) == 0 ? nil : errno
            close(descriptor)
            eventLoop.execute { completion.value(failure) }
        }
    }

    /// Ends the thread once the syncs handed to it are done.
    func stop() async {
        try? await pool.shutdownGracefully()
    }
}
