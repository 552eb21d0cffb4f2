public import NotifyProtocol

/// Who may publish to which topics, and who may read them (subscribe, or ask for the buffered message), decided on
/// the kernel's word about the peer (its uid, groups and unit, from `SO_PEERCRED`, `SO_PEERGROUPS` and its cgroup),
/// never on anything the client says.
///
/// How it decides: the administrator's ``rules``, in order, then the built-in rules; the first that applies decides.
/// So a rule can open or close anything, the built-in defaults included. The built-in rules:
/// - `$…` topics are published only by the daemon; anyone may read them.
/// - `user.<uid>` and the topics below it are private to that uid, and to root.
/// - `system.…` topics are published only by root; anyone may read them.
/// - Every other topic is open to every local user.
///
/// A subscription with a wildcard is never refused for what it might match: it simply never delivers a topic its
/// connection may not read. A subscription to one topic by name that may not be read is refused.
public struct AccessPolicy: Sendable, Hashable {
    /// What a peer wants to do with a topic.
    public enum Access: String, Sendable, Hashable {
        /// Publish to it, or clear its buffered message.
        case publish
        /// Receive its messages, or read its buffered message.
        case read
    }

    /// The rule that decided an access.
    public enum Rule: Sendable, Hashable, CustomStringConvertible {
        case reservedForDaemon
        case reservedReadable
        case privateToUser(UInt32)
        case systemPublishedByRoot
        case systemReadable
        case open
        /// One of the administrator's rules.
        case configured(AccessRule)

        public var description: String {
            switch self {
            case .configured(let rule): rule.description
            case .reservedForDaemon: "topics starting with $ are reserved for the daemon, which alone publishes them"
            case .reservedReadable: "topics starting with $ are readable by everyone"
            case .privateToUser(let owner): "user.\(owner) and the topics below it are private to uid \(owner) and root"
            case .systemPublishedByRoot: "system topics are published only by root"
            case .systemReadable: "system topics are readable by everyone"
            case .open: "topics outside $, user.<uid> and system are open to every local user"
            }
        }

        /// The rule as told to the peer of `uid`: an administrator's rule is named (by its name and line) but not
        /// quoted to anyone but root, as its text names the users, groups and units it is about.
        public func description(toUID uid: UInt32) -> String {
            guard case .configured(let rule) = self, uid != 0 else { return description }
            let place = rule.line.map { " (line \($0))" } ?? ""
            return "rule \(rule.name)\(place) of the daemon's configuration"
        }
    }

    /// The outcome of ``decide(_:topic:peer:)``: whether it is allowed, and the rule that said so.
    public struct Decision: Sendable, Hashable {
        /// Whether the access is allowed.
        public var isAllowed: Bool
        /// The rule that decided; its description is the sentence for errors and logs.
        public var rule: Rule
    }

    /// The built-in rules alone.
    public static let `default` = AccessPolicy()

    /// The administrator's rules, tried in order before the built-in ones.
    public var rules: [AccessRule]

    /// Creates a policy of `rules` before the built-in ones.
    public init(rules: [AccessRule] = []) {
        self.rules = rules
    }

    /// Whether `peer` may have `access` to `topic`, and by which rule. Cheap enough for every publish: without
    /// rules of the administrator's it looks at the first bytes of the name and builds no string.
    public func decide(_ access: Access, topic: Topic, peer: PeerCredentials) -> Decision {
        // `$` topics are the daemon's own, whatever the rules say: a client that could publish `$notifyd.…` could
        // pass for the daemon. Who may read them is the rules' business like any other topic's.
        if topic.isReserved && access == .publish { return Decision(isAllowed: false, rule: .reservedForDaemon) }
        for rule in rules where rule.applies(to: access, of: topic, by: peer) {
            return Decision(isAllowed: rule.effect == .allow, rule: .configured(rule))
        }
        let uid = peer.uid
        let name = topic.name.utf8
        if topic.isReserved { return Decision(isAllowed: true, rule: .reservedReadable) }
        if let owner = Self.privateOwner(of: name) {
            return Decision(isAllowed: uid == owner || uid == 0, rule: .privateToUser(owner))
        }
        if name.starts(with: "system".utf8), name.count == 6 || name.dropFirst(6).first == UInt8(ascii: ".") {
            if access == .read { return Decision(isAllowed: true, rule: .systemReadable) }
            return Decision(isAllowed: uid == 0, rule: .systemPublishedByRoot)
        }
        return Decision(isAllowed: true, rule: .open)
    }

    /// Whether `peer` may have `access` to `topic`.
    @inlinable
    public func allows(_ access: Access, topic: Topic, peer: PeerCredentials) -> Bool {
        decide(access, topic: topic, peer: peer).isAllowed
    }

    /// The uid of `user.<uid>` or `user.<uid>.…`; nil for other names (`user.alice` is an ordinary topic).
    private static func privateOwner(of name: String.UTF8View) -> UInt32? {
        guard name.starts(with: "user.".utf8) else { return nil }
        var owner: UInt32 = 0
        var digits = 0
        for byte in name.dropFirst(5) {
            if byte == UInt8(ascii: ".") { break }
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            let (times10, overflow1) = owner.multipliedReportingOverflow(by: 10)
            let (next, overflow2) = times10.addingReportingOverflow(UInt32(byte - UInt8(ascii: "0")))
            guard !overflow1, !overflow2 else { return nil }
            owner = next
            digits += 1
        }
        return digits > 0 ? owner : nil
    }
}
