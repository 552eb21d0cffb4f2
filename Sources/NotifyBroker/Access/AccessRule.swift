public import NotifyProtocol

/// One rule of an administrator's access policy: who may (or may not) publish to or read the topics a pattern
/// matches.
///
/// Written as one line, `allow|deny publish|read|all PATTERN WHO...`, for example
/// `allow publish backup.> group:backup unit:backup.service`. A rule applies to a peer when the access is one it
/// names, the topic matches its pattern, and the peer is any one of its WHOs:
/// - `user:NAME` or `user:UID`: the peer's uid;
/// - `group:NAME` or `group:GID`: the peer's primary or any supplementary group;
/// - `unit:NAME`: the systemd unit the peer runs in;
/// - `everyone`: any peer.
///
/// Names are resolved to numbers when the rule is read, so a rule for a user or group that does not exist is an
/// error then, not a rule that silently never applies. See ``AccessPolicy`` for how rules combine.
public struct AccessRule: Sendable, Hashable, CustomStringConvertible {
    /// Whether a rule lets the access happen.
    public enum Effect: String, Sendable, Hashable {
        case allow
        case deny
    }

    /// One peer, or set of peers, a rule is about.
    public enum Principal: Sendable, Hashable, CustomStringConvertible {
        case user(UInt32)
        case group(UInt32)
        case unit(String)
        case everyone

        /// Whether `peer` is one of these; a peer whose groups are not known is taken to be in a group when
        /// `unknownGroupsMatch` (for a `deny`), and not otherwise, so that either way the rule fails closed.
        func includes(_ peer: PeerCredentials, unknownGroupsMatch: Bool) -> Bool {
            switch self {
            case .user(let uid): peer.uid == uid
            case .group(let gid): peer.gid == gid || peer.groups.contains(gid) || (!peer.groupsAreKnown && unknownGroupsMatch)
            case .unit(let name): peer.unit == name
            case .everyone: true
            }
        }

        public var description: String {
            switch self {
            case .user(let uid): "user:\(uid)"
            case .group(let gid): "group:\(gid)"
            case .unit(let name): "unit:\(name)"
            case .everyone: "everyone"
            }
        }
    }

    /// Turns user and group names into numbers, as the system knows them.
    public struct NameResolver: Sendable {
        /// The uid of a user name, or nil if there is no such user.
        public var uid: @Sendable (String) -> UInt32?
        /// The gid of a group name, or nil if there is no such group.
        public var gid: @Sendable (String) -> UInt32?

        /// Creates a resolver from two lookups.
        public init(uid: @escaping @Sendable (String) -> UInt32?, gid: @escaping @Sendable (String) -> UInt32?) {
            self.uid = uid
            self.gid = gid
        }
    }

    /// The rule's name, as the configuration gives it.
    public var name: String
    /// The line of the configuration file it is on, if it came from one.
    public var line: Int?
    public var effect: Effect
    /// The accesses it is about: publish, read, or both.
    public var accesses: Set<AccessPolicy.Access>
    public var pattern: TopicPattern
    public var principals: [Principal]

    /// Creates a rule.
    public init(
        name: String,
        line: Int? = nil,
        effect: Effect,
        accesses: Set<AccessPolicy.Access>,
        pattern: TopicPattern,
        principals: [Principal]
    ) {
        self.name = name
        self.line = line
        self.effect = effect
        self.accesses = accesses
        self.pattern = pattern
        self.principals = principals
    }

    /// Reads a rule from its text, `allow|deny publish|read|all PATTERN WHO...`.
    /// - Throws: ``AccessRuleError`` saying what is wrong, in a sentence.
    public init(parsing text: String, name: String, line: Int? = nil, resolver: NameResolver) throws(AccessRuleError) {
        let words = text.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        guard words.count >= 4 else {
            throw AccessRuleError("a rule is `allow|deny publish|read|all PATTERN WHO...`, as in `allow publish backup.> group:backup`; got \"\(text)\"")
        }
        guard let effect = Effect(rawValue: words[0]) else {
            throw AccessRuleError("a rule starts with allow or deny, not \"\(words[0])\"")
        }
        let accesses: Set<AccessPolicy.Access>
        switch words[1] {
        case "publish": accesses = [.publish]
        case "read": accesses = [.read]
        case "all": accesses = [.publish, .read]
        default: throw AccessRuleError("after \(words[0]) comes publish, read or all, not \"\(words[1])\"")
        }
        let pattern: TopicPattern
        do {
            pattern = try TopicPattern(words[2])
        } catch {
            throw AccessRuleError("\"\(words[2])\" is not a topic pattern: \(error)")
        }
        var principals: [Principal] = []
        for word in words[3...] {
            principals.append(try Self.principal(word, resolver: resolver))
        }
        self.init(name: name, line: line, effect: effect, accesses: accesses, pattern: pattern, principals: principals)
    }

    private static func principal(_ word: String, resolver: NameResolver) throws(AccessRuleError) -> Principal {
        if word == "everyone" { return .everyone }
        guard let colon = word.firstIndex(of: ":") else {
            throw AccessRuleError("\"\(word)\" is not a WHO: use user:NAME, user:UID, group:NAME, group:GID, unit:NAME or everyone")
        }
        let kind = word[..<colon]
        let value = String(word[word.index(after: colon)...])
        guard !value.isEmpty else { throw AccessRuleError("\"\(word)\" names nobody") }
        switch kind {
        case "user":
            if let uid = UInt32(value) ?? resolver.uid(value) { return .user(uid) }
            throw AccessRuleError("there is no user \"\(value)\"")
        case "group":
            if let gid = UInt32(value) ?? resolver.gid(value) { return .group(gid) }
            throw AccessRuleError("there is no group \"\(value)\"")
        case "unit":
            return .unit(value)
        default:
            throw AccessRuleError("\"\(word)\" is not a WHO: use user:, group:, unit: or everyone")
        }
    }

    /// Whether the rule applies to `peer` having `access` to `topic`.
    public func applies(to access: AccessPolicy.Access, of topic: Topic, by peer: PeerCredentials) -> Bool {
        accesses.contains(access) && pattern.matches(topic)
            && principals.contains { $0.includes(peer, unknownGroupsMatch: effect == .deny) }
    }

    /// The rule as it would be written.
    public var text: String {
        let access = accesses.count == 2 ? "all" : accesses.first?.rawValue ?? "none"
        return ([effect.rawValue, access, pattern.text] + principals.map(\.description)).joined(separator: " ")
    }

    public var description: String {
        let place = line.map { " (line \($0))" } ?? ""
        return "rule \(name)\(place): \(text)"
    }
}

/// A rule that cannot be read, and why.
public struct AccessRuleError: Error, Sendable, CustomStringConvertible {
    public var description: String

    init(_ description: String) {
        self.description = description
    }
}
