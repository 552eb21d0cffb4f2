package import NotifyProtocol
import NIOCore
import OrderedCollections

/// The newest retained message (or clear) of each topic exported within one flush window, for the stream of latest
/// messages (`<prefix>-latest.<topic>`), which keeps only a topic's newest: a topic retained a million times a second
/// costs that stream a write per window, not one per message. The live subject still gets every message.
///
/// A clear is newer than what it clears, and a message than a clear before it: whichever came last wins, as on the
/// live subject. What is held is bounded by the window (a few milliseconds of exports) and by ``byteLimit``, past
/// which the window ends early.
package struct LatestCoalescer {
    /// The pending messages, in the order their topics first came in this window.
    private var pending: OrderedDictionary<Topic, FleetExport> = [:]
    /// Payload bytes held.
    package private(set) var bytes = 0
    /// Bytes of the buffers those payloads are slices of (the link's reads), which holding them keeps alive: what
    /// the bound counts, so that a few bytes of each of many reads cannot hold many reads.
    private var heldStorage = 0
    /// Retained messages whose write to the stream of latest messages a newer one of their topic replaced.
    package private(set) var coalesced: UInt64 = 0

    /// Bytes held past which the window should end now.
    package static let byteLimit = 1 << 20

    package init() {}

    package var isEmpty: Bool { pending.isEmpty }

    /// Whether the window should end now, whatever its time.
    package var isFull: Bool { heldStorage >= Self.byteLimit }

    /// Holds `export` (retained, or a clear) as its topic's newest.
    package mutating func note(_ export: FleetExport) {
        let size = export.delivery.payload.readableBytes
        if let replaced = pending.updateValue(export, forKey: export.delivery.topic) {
            bytes -= replaced.delivery.payload.readableBytes
            heldStorage -= replaced.delivery.payload.storageCapacity
            coalesced += 1
        }
        bytes += size
        heldStorage += export.delivery.payload.storageCapacity
    }

    /// The messages held, in the order their topics came, and the window starts again.
    package mutating func take() -> [FleetExport] {
        let taken = Array(pending.values)
        pending.removeAll(keepingCapacity: true)
        bytes = 0
        heldStorage = 0
        return taken
    }
}
