

/// What a message crossing between the daemon and its fleet service is (protocol 5; PROTOCOL.md, "The fleet
/// service"): one that became its topic's buffered message, one that did not, or a `CLEAR` of the buffered one.
public enum FleetMessageKind: Sendable, Hashable {
    /// Published and kept as the topic's buffered message (`retain`).
    case retained
    /// Published and not kept (`noretain`).
    case notRetained
    /// The topic's buffered message was cleared (`clear`): no payload; the sequence number is the topic's last,
    /// the time the clear's, the publisher who cleared it.
    case clear
}

/// A message published on this host, as the daemon hands it to the fleet service that follows them (`EXP`).
public struct FleetExport: Sendable, Hashable {
    /// The message, with this host's sequence number and time and its publisher (whose ``Publisher/host`` is nil).
    public var delivery: Delivery
    /// Whether it was retained, or is a clear.
    public var kind: FleetMessageKind

    /// Creates an export.
    public init(delivery: Delivery, kind: FleetMessageKind) {
        self.delivery = delivery
        self.kind = kind
    }
}

/// A message another host published, as the fleet service hands it to the daemon to publish here (`IMPORT`).
///
/// Everything in it is what the origin host claims; the daemon checks each field where the request enters, as it
/// would a local publish and more (docs/federation.md, "Another host's provenance is what its publisher claims").
public struct FleetImport: Sendable, Hashable {
    /// The message: its topic, its number and time on its host, its publisher there (``Publisher/host`` is the
    /// origin), its payload (empty for a clear).
    public var delivery: Delivery
    /// Whether the origin retained it, or cleared the topic's buffered message.
    public var kind: FleetMessageKind
    /// Read back from the fleet's stream of latest messages rather than as it was published: the daemon may hold it
    /// already, and the times decide between it and what the daemon holds.
    public var replayed: Bool

    /// Creates an import.
    public init(delivery: Delivery, kind: FleetMessageKind, replayed: Bool = false) {
        self.delivery = delivery
        self.kind = kind
        self.replayed = replayed
    }
}

extension FleetImport {
    /// Whether `name` can name a host in a delivery: 1 to 64 bytes of ASCII letters, digits, `.`, `-` and `_`
    /// (what hostnames are made of; never a `/` or a space, which frame the field it is written in).
    public static func isValidHostName(_ name: String) -> Bool {
        let bytes = name.utf8
        guard (1...64).contains(bytes.count) else { return false }
        return bytes.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "."), UInt8(ascii: "-"), UInt8(ascii: "_"):
                true
            default:
                false
            }
        }
    }

    /// Whether `name` can be a publisher's unit in another host's message: a systemd unit name, 1 to 255 bytes of
    /// ASCII letters, digits and `:`, `-`, `_`, `.`, `\`, `@` (systemd's own rule). Anything else is taken in as no
    /// unit: a peer's claim must not make a delivery's line longer than a client reads, or a state-log record
    /// larger than the daemon wrote.
    public static func isValidUnitName(_ name: String) -> Bool {
        let bytes = name.utf8
        guard (1...255).contains(bytes.count), name != "-" else { return false }
        return bytes.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: ":"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "\\"), UInt8(ascii: "@"):
                true
            default:
                false
            }
        }
    }
}

extension FleetMessageKind {
    /// The word on an `EXP` or `IMPORT` line.
    var word: StaticString {
        switch self {
        case .retained: "retain"
        case .notRetained: "noretain"
        case .clear: "clear"
        }
    }
}
