import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension StandardOutput {
    /// Returns once nobody reads standard output any more (the reader of its pipe or socket is gone), or when the
    /// calling task is cancelled. A terminal, a file or `/dev/null` never goes away.
    ///
    /// A thread of its own blocks in `poll` on descriptor 1 asking for no events at all: the kernel still reports
    /// POLLERR when a pipe loses its last reader and POLLHUP when a socket's peer closes, and nothing else wakes it.
    static func readerDeparture() async {
        let waiter = DepartureWaiter()
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                waiter.install(continuation)
                #if os(Linux)
                var thread = pthread_t()
                let context = Unmanaged.passRetained(waiter).toOpaque()
                if pthread_create(&thread, nil, watchStandardOutput, context) == 0 {
                    pthread_detach(thread)
                } else {
                    Unmanaged<DepartureWaiter>.fromOpaque(context).release()
                }
                #endif
            }
        } onCancel: {
            waiter.resume()
        }
    }
}

/// Resumes its continuation once, whoever comes first: the watching thread, or cancellation.
private final class DepartureWaiter: Sendable {
    private let state = Mutex<(continuation: CheckedContinuation<Void, Never>?, resumed: Bool)>((nil, false))

    func install(_ continuation: CheckedContinuation<Void, Never>) {
        let resumeNow = state.withLock { state in
            if state.resumed { return true }
            state.continuation = continuation
            return false
        }
        if resumeNow { continuation.resume() }
    }

    func resume() {
        let continuation = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.resumed = true
            defer { state.continuation = nil }
            return state.continuation
        }
        continuation?.resume()
    }
}

#if os(Linux)
/// The watching thread's body: waits for descriptor 1 to report an error or a hang-up. A closed descriptor
/// (POLLNVAL) means there was never a reader to lose; the thread then ends without resuming anyone.
private func watchStandardOutput(_ context: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    let waiter = Unmanaged<DepartureWaiter>.fromOpaque(context!).takeRetainedValue()
    var entry = pollfd(fd: 1, events: 0, revents: 0)
    while true {
        if poll(&entry, 1, -1) < 0 {
            if errno == EINTR { continue }
            return nil
        }
        if entry.revents & Int16(POLLNVAL) != 0 { return nil }
        if entry.revents & Int16(POLLERR | POLLHUP) != 0 {
            waiter.resume()
            return nil
        }
    }
}
#endif
