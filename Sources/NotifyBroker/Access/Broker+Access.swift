import NIOCore
import NotifyProtocol

/// The access policy applied to requests: denials, and `EXPLAIN`.
extension Broker {
    /// Answers which rules decide `topic` for the session's peer, or for `uid`: only root may ask about others,
    /// who are then taken with their groups as ``groupsOfUser`` tells, and no unit.
    func explain(_ topic: Topic, uid: UInt32?, id: UInt64?, for session: Session) {
        var peer = session.peer
        if let uid, uid != peer.uid {
            guard peer.uid == 0 else {
                let error = ProtocolError(.notPermitted, "only root may ask what another uid may do", requestID: id)
                return refuse(error, subject: topic.name, to: session)
            }
            let membership = groupsOfUser?(uid)
            peer = PeerCredentials(pid: 0, uid: uid, gid: membership?.gid ?? uid, groups: membership?.groups ?? [])
        }
        let decisions = [AccessPolicy.Access.publish, .read].map { access in
            let decision = configuration.accessPolicy.decide(access, topic: topic, peer: peer)
            return AccessExplanation.Decision(
                access: access.rawValue,
                isAllowed: decision.isAllowed,
                rule: decision.rule.description(toUID: session.peer.uid)
            )
        }
        var reply = allocator.buffer(capacity: 256)
        reply.writeExplanation(requestID: id, AccessExplanation(uid: peer.uid, decisions: decisions))
        queue(reply, to: session)
    }

    /// The `not-permitted` error for `access` to `topic` by `session`'s peer, if the policy denies it.
    func denial(_ access: AccessPolicy.Access, of topic: Topic, to session: Session, id: UInt64?) -> ProtocolError? {
        let decision = configuration.accessPolicy.decide(access, topic: topic, peer: session.peer)
        guard !decision.isAllowed else { return nil }
        let verb = access == .publish ? "publish to or clear" : "read"
        let sentence = "uid \(session.peer.uid) may not \(verb) \"\(topic.name)\": \(decision.rule.description(toUID: session.peer.uid));"
            + " EXPLAIN \(topic.name) (notify explain) shows who may"
        return ProtocolError(.notPermitted, sentence, requestID: id)
    }
}
