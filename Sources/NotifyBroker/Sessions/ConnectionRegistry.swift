import NotifyProtocol

/// The connections open now and what each user (uid) holds through them: the sessions by identity, one
/// ``UserAccount`` per uid that holds anything, and the bytes read from all connections and not carried out yet.
/// The broker owns one; it decides what to refuse, this counts.
struct ConnectionRegistry {
    /// Every session not closed yet.
    private(set) var open: Set<Session> = []
    /// What each uid holds, for the limits per user; only uids that hold something are here.
    private(set) var accounts: [UInt32: UserAccount] = [:]
    /// Bytes read from all connections and not carried out yet (``Broker/holdUnread(_:for:)``).
    private(set) var unreadBytesTotal = 0
    private var nextSessionID: UInt64 = 1

    /// Makes and registers a session for a new connection, counted in its uid's account.
    mutating func register(peer: PeerCredentials, transport: any SessionTransport) -> Session {
        let account = account(of: peer.uid)
        let session = Session(id: nextSessionID, peer: peer, account: account, transport: transport)
        nextSessionID += 1
        open.insert(session)
        account.connections += 1
        return session
    }

    /// Takes a closed session off the open ones (its account's count of connections is the broker's to give back,
    /// once the rest the session held is given back too).
    mutating func unregister(_ session: Session) { open.remove(session) }

    /// The account of `uid`, made if it holds nothing yet.
    mutating func account(of uid: UInt32) -> UserAccount {
        if let account = accounts[uid] { return account }
        let account = UserAccount(uid: uid)
        accounts[uid] = account
        return account
    }

    /// Lets go of `account` if it holds nothing and is the one registered for its uid.
    mutating func forgetIfEmpty(_ account: UserAccount) {
        guard account.isEmpty, accounts[account.uid] === account else { return }
        accounts[account.uid] = nil
    }

    /// Counts that `session` now keeps `bytes` read and not carried out, against its account and the total.
    /// - Returns: how much that added (negative: given back).
    mutating func holdUnread(_ bytes: Int, for session: Session) -> Int {
        let delta = bytes - session.unreadBytes
        session.unreadBytes = bytes
        session.account.unreadBytes += delta
        unreadBytesTotal += delta
        return delta
    }

    /// Gives back the room a burst of connections left in the set, once the daemon is idle: a set keeps its
    /// capacity, and the few blocks it holds pin pages of the heap that the burst spread them over.
    mutating func releaseIdleCapacity() {
        guard open.capacity > 2 * open.count + 64 else { return }
        var compact = Set<Session>(minimumCapacity: open.count)
        for session in open { compact.insert(session) }
        open = compact
    }
}
