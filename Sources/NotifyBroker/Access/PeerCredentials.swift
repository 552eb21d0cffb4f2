public import NotifyProtocol

/// Who is at the other end of a connection, as the kernel reports it (`SO_PEERCRED`, `SO_PEERGROUPS`): never what a
/// client claims.
public struct PeerCredentials: Sendable, Hashable {
    /// The peer's process id at connect time.
    public var pid: Int32
    /// The peer's effective user id.
    public var uid: UInt32
    /// The peer's effective group id.
    public var gid: UInt32
    /// The peer's supplementary groups, when the daemon can tell (`SO_PEERGROUPS`).
    public var groups: [UInt32]
    /// Whether `groups` is the whole list. When the kernel's answer could not be read (a peer in more groups than
    /// the daemon asks for), rules by group fail closed: a `deny` applies, an `allow` does not.
    public var groupsAreKnown: Bool
    /// The peer's systemd unit, when it has one and the daemon can tell.
    public var unit: String?

    /// Creates credentials.
    public init(pid: Int32, uid: UInt32, gid: UInt32, groups: [UInt32] = [], groupsAreKnown: Bool = true, unit: String? = nil) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
        self.groups = groups
        self.groupsAreKnown = groupsAreKnown
        self.unit = unit
    }

    /// The identity stamped on what this peer publishes.
    public var publisher: Publisher { Publisher(uid: uid, pid: pid, unit: unit) }
}
