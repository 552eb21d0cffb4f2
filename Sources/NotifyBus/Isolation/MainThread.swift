import Dispatch

/// Whether the calling code runs on the main queue, the main actor's executor, asked without Foundation: the main
/// queue carries a mark that only code running on it reads back.
///
/// Code on the main thread outside a main-queue job (a synchronous `main` before its first `await`) is not seen as
/// such: it is handed over as from any other thread, which is always correct, only slower.
package enum MainThread {
    private static let key = DispatchSpecificKey<Bool>()
    private static let marked: Void = DispatchQueue.main.setSpecific(key: key, value: true)

    package static var isCurrent: Bool {
        _ = marked
        return DispatchQueue.getSpecific(key: key) == true
    }
}
