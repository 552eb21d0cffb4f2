/// Where a message stands in its origin's exports: `<epoch>-<number>`, the `<export>` field of its `Notifyd` header
/// (``Provenance``). The origin's fleet service numbers what it exports 1, 2, 3, … from each start (its epoch: the
/// time it started, in microseconds), so a receiver sees at once that it lacks some (a gap in the numbers) or that the
/// origin started again (a newer epoch).
///
/// Read from NATS, where any client of the fleet's account can write one: both numbers are checked digits within
/// `UInt64`, and a receiver believes a number only once the origin's log shows it (``OriginSequencer``).
package struct ExportStamp: Equatable, Sendable, CustomStringConvertible {
    package var epoch: UInt64
    package var number: UInt64

    package init(epoch: UInt64, number: UInt64) {
        self.epoch = epoch
        self.number = number
    }

    /// `<epoch>-<number>`, each 1 to 19 digits and not 0; nil for anything else.
    package init?(parsing bytes: UnsafeRawBufferPointer) {
        guard let dash = bytes.firstIndex(of: UInt8(ascii: "-")),
            let epoch = Provenance.number(UnsafeRawBufferPointer(rebasing: bytes[..<dash])),
            let number = Provenance.number(UnsafeRawBufferPointer(rebasing: bytes[(dash + 1)...])),
            epoch > 0, number > 0
        else { return nil }
        self.init(epoch: epoch, number: number)
    }

    package init?(_ text: String) {
        var text = text
        guard let stamp = text.withUTF8({ ExportStamp(parsing: UnsafeRawBufferPointer($0)) }) else { return nil }
        self = stamp
    }

    package var description: String { "\(epoch)-\(number)" }
}
