import NIOConcurrencyHelpers

/// Runs a program's asynchronous entry point while the main thread waits for it.
///
/// An `async` `main` gives the main thread to `dispatch_main()`, which ends it with `pthread_exit`. glibc then loads
/// libgcc_s and unwinds the main thread's stack through the binary's unwind tables, and those pages stay resident
/// for the life of the process: about 0.7 MiB of the daemon's idle memory (README, "Performance"). Waiting on a
/// lock instead keeps the main thread, asleep, which costs nothing the process did not already have.
///
/// Only `notifyd` uses it (for `notify` it cost more than it saved: README, "Performance"), and nothing in it runs
/// on the main actor, which this leaves without a thread to run on.
package enum BlockingMain {
    /// Runs `body` in a task and returns once it has finished; `body` may also end the process itself (`exit`).
    package static func run(_ body: @escaping @Sendable () async -> Void) {
        let finished = ConditionLock(value: false)
        Task.detached {
            await body()
            finished.lock()
            finished.unlock(withValue: true)
        }
        finished.lock(whenValue: true)
        finished.unlock()
    }
}
