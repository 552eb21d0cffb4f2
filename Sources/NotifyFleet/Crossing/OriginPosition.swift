/// Where a host stands in one origin's exports (``OriginSequencer``).
package struct OriginPosition: Equatable, Sendable {
    /// The origin's run (its fleet service's start) whose numbers ``taken`` counts.
    package var epoch: UInt64
    /// The last number taken in: the next to take is the one after.
    package var taken: UInt64
    /// The origin's log holds nothing this host lacks at or before this stream sequence: a read starts after it.
    package var logSequence: UInt64

    package init(epoch: UInt64, taken: UInt64, logSequence: UInt64) {
        self.epoch = epoch
        self.taken = taken
        self.logSequence = logSequence
    }
}
