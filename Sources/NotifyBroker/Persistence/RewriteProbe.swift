/// A test's view of a rewrite of the log (a compaction, or a recovery from damage): each step is reported once it is
/// done, and a probe may throw there to play the process dying at that point (nothing after it reaches the disk),
/// or make the directory's `fsync` fail.
struct RewriteProbe: Sendable {
    /// The steps, in the order a rewrite takes them.
    enum Step: Sendable, Equatable, CaseIterable {
        /// `state.log.tmp` is written and synced.
        case temporarySynced
        /// The damaged log has a second name of its own, and the directory is synced (recovery only).
        case keptAside
        /// `state.log.tmp` has been renamed over `state.log`.
        case replaced
        /// The directory holding the new name is synced: the rewrite is done.
        case directorySynced
    }

    /// Called after each step; what it throws ends the rewrite there.
    var onStep: @Sendable (Step) throws -> Void = { _ in }
    /// The `errno` every directory `fsync` fails with, when set.
    var directorySyncError: Int32?

    func passed(_ step: Step) throws {
        try onStep(step)
    }
}
