import NIOCore
import NotifyProtocol

/// Requests about topics rather than messages: `LATEST`, `CLEAR` and `TOPICS`.
extension Broker {
    /// `state`'s buffered message, wherever it is kept: a message still in the batch is settled first.
    func retained(of state: TopicState) -> BufferedMessage? {
        if state.pendingRetained != nil { settleHistory() }
        return state.retained
    }

    func latest(_ topic: Topic, id: UInt64?, for session: Session) {
        if let denial = denial(.read, of: topic, to: session, id: id) {
            return refuse(denial, subject: topic.name, to: session)
        }
        guard let state = topicTable[topic.name], let retained = retained(of: state) else {
            let sentence = "nothing is buffered for topic \"\(topic.name)\"; it has no messages yet, was cleared, or only got messages sent without retaining (--no-retain, noretain)"
            return reply(ProtocolError(.notFound, sentence, requestID: id), to: session)
        }
        workDone &+= retained.replyWork
        queue(retained.withFrame { lastFrame(id: id, messageFrame: $0) }, to: session)
    }

    /// Answers the last `count` messages of the topic's history as `LAST` frames, oldest first, then `OK <n>`: the
    /// newest that fit in ``Command/historyReplyBytes``, as replies are never dropped and must stay small.
    func history(_ topic: Topic, count: Int?, id: UInt64?, for session: Session) {
        if let denial = denial(.read, of: topic, to: session, id: id) {
            return refuse(denial, subject: topic.name, to: session)
        }
        var sent: UInt64 = 0
        if let history = topicTable[topic.name]?.history {
            var fitting = 0
            var bytes = 0
            history.forEach(newestFirst: count) { entry in
                guard fitting == 0 || bytes + entry.length <= Command.historyReplyBytes else { return false }
                bytes += entry.length
                fitting += 1
                return true
            }
            history.forEach(last: fitting, topic: topic.name) { _, frame in
                queue(lastFrame(id: id, messageFrame: frame), to: session)
                sent += 1
            }
        }
        replyOK(id, value: sent, to: session)
    }

    func clear(_ topic: Topic, id: UInt64?, for session: Session) {
        if let denial = denial(.publish, of: topic, to: session, id: id) {
            return refuse(denial, subject: topic.name, to: session)
        }
        if let refusal = storageRefusal("it cannot save a clear for now; try again later", id: id) {
            return refuse(refusal, subject: topic.name, to: session)
        }
        let state = topicTable[topic.name]
        if let state, retained(of: state) != nil {
            dropRetained(of: state, by: session)
        }
        if let follower = fleet.follower, !session.isImporter {
            // Other hosts clear it too, and the stream of latest messages keeps the clear instead of the message,
            // so that no host takes it back in: also when this host held nothing for the topic.
            exportClearToFleet(topic, sequence: state?.sequence ?? 0, time: clock.stamp(), by: session, to: follower)
        }
        replyOK(id, to: session)
    }

    /// Lets go of `state`'s buffered message, cleared by `session`: the user's quota, the state log, the event.
    func dropRetained(of state: TopicState, by session: Session) {
        guard let retained = retained(of: state) else { return }
        state.dropRetained()
        topicTable.countRetained(topics: -1, payloadBytes: -retained.payloadSize, frameBytes: -retained.frameLength)
        topicTable.listForgettable(state)
        retained.owner.retainedBytes -= retained.payloadSize
        retained.owner.retainedTopics -= 1
        forgetIfEmpty(retained.owner)
        journal.markUnsaved(state)
        onEvent?(.cleared(state.topic, by: session.peer))
        awaitCommit(session)
    }

    /// The topics `peer` may read that match `pattern`, in name order, after `after`: one page (see
    /// ``Command/topicsPageSize``), so that a reply stays small however many topics there are.
    func topicInfos(matching pattern: TopicPattern?, after: Topic?, readableBy peer: PeerCredentials) -> [TopicInfo] {
        if let pattern, pattern.isLiteral {
            // One name: one lookup, not a scan and sort of every topic.
            guard let state = topicTable[pattern.text], after.map({ state.topic > $0 }) ?? true,
                configuration.accessPolicy.allows(.read, topic: state.topic, peer: peer)
            else { return [] }
            return [state.info]
        }
        var page: [TopicState] = []
        workDone &+= topicTable.forEach(matching: pattern) { state in
            if let after, state.topic <= after { return }
            guard configuration.accessPolicy.allows(.read, topic: state.topic, peer: peer) else { return }
            page.append(state)
            // Keeps the first page's worth only: sorted and cut whenever it holds two pages.
            if page.count >= 2 * Command.topicsPageSize {
                page.sort { $0.topic < $1.topic }
                page.removeLast(page.count - Command.topicsPageSize)
            }
        }
        page.sort { $0.topic < $1.topic }
        return page.prefix(Command.topicsPageSize).map(\.info)
    }
}
