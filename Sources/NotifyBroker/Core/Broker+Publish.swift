public import NIOCore
public import NotifyProtocol

/// A publish: checked, numbered in its topic (made in the ``TopicTable`` if new), encoded once into the batch,
/// handed to each subscriber (``subscribers(of:)``, then the output in Broker+Output.swift), and kept as the topic's
/// buffered message if retained.
extension Broker {
    /// Carries out a `PUB` whose payload is still in the buffer it was read into (`buffer`, at the frame's range):
    /// the daemon's hot path, which makes no ``Request`` and no slice of the receive buffer. A publish that must
    /// wait (the session holds back, its socket is full) is made a request then, and waits as any other does.
    public func handlePublish(_ frame: PublishFrame, in buffer: ByteBuffer, from session: Session) {
        guard admits(from: session, holding: .request(frame.request(in: buffer))) else { return }
        buffer.withVeryUnsafeBytes { bytes in
            publish(frame.topic, payload: UnsafeRawBufferPointer(rebasing: bytes[frame.payload]), options: frame.options, id: frame.id, from: session)
        }
    }

    /// Publishes `payload`, lent for the call.
    func publish(_ topic: Topic, payload: UnsafeRawBufferPointer, options: PublishOptions, id: UInt64?, from session: Session) {
        // A run of publishes to one topic skips the table's lookup, and while the configuration stays the same, the
        // access rules' decision too (see ``Session/lastPublishedTopic``). Borrowed from the session, which holds it
        // through the publish: a reference counted per message is a tenth of a small publish's time.
        if session.lastPublishAllowedGeneration == configurationGeneration, let last = session.lastPublishedTopicPointer {
            let published = last._withUnsafeGuaranteedRef { state in
                guard !state.isForgotten, state.topic == topic else { return false }
                if let refusal = refusal(toRetain: options.retain, topic, payloadSize: payload.count, id: id, by: session.account) {
                    refuse(refusal, subject: topic.name, to: session)
                } else {
                    publish(to: state, topic, payload: payload, options: options, id: id, from: session)
                }
                return true
            }
            if published { return }
        }
        if let denial = denial(.publish, of: topic, to: session, id: id) {
            return refuse(denial, subject: topic.name, to: session)
        }
        if let refusal = refusal(toRetain: options.retain, topic, payloadSize: payload.count, id: id, by: session.account) {
            return refuse(refusal, subject: topic.name, to: session)
        }
        var made = session.lastPublishedTopic
        if made.map({ $0.isForgotten || $0.topic != topic }) ?? true {
            var work = 0
            made = topicTable.state(
                for: topic,
                work: &work,
                isKept: { routing.index.hasExactSubscribers(to: $0.topic.name) },
                forgotten: {
                    // Sessions that still hold it as their last topic must not keep its subscribers alive through it.
                    routing.dropList(of: $0)
                    settleHistory()
                    historyLedger.forget($0)
                    clock.moveOnAfterForgetting()
                }
            )
            workDone &+= work
            session.lastPublishedTopic = made
        }
        session.lastPublishAllowedGeneration = configurationGeneration
        guard let state = made else {
            let sentence = "the daemon already tracks \(configuration.maxTopics) topics that all hold a buffered message or have subscribers by name"
                + " (its limit); clear some (notify clear, CLEAR), or publish to a topic it tracks without retaining"
                + " (notify send --no-retain, noretain)"
            return refuse(ProtocolError(.limitReached, sentence, requestID: id), subject: topic.name, to: session)
        }
        publish(to: state, topic, payload: payload, options: options, id: id, from: session)
    }

    /// Why a publish that asks to be retained is refused whole: over a limit on buffered messages, or while the
    /// state log cannot be written.
    private func refusal(toRetain retain: Bool, _ topic: Topic, payloadSize: Int, id: UInt64?, by account: UserAccount) -> ProtocolError? {
        guard retain else { return nil }
        if let refusal = retainRefusal(topic, payloadSize: payloadSize, by: account) {
            return ProtocolError(.limitReached, refusal, requestID: id)
        }
        return storageRefusal(
            "it keeps no new buffered messages for now; publish without retaining (notify send --no-retain, noretain), or try again later",
            id: id
        )
    }

    /// Publishes `payload` to `state`, `topic`'s state, once the publish is allowed.
    private func publish(to state: TopicState, _ topic: Topic, payload: UnsafeRawBufferPointer, options: PublishOptions, id: UInt64?, from session: Session) {
        // Another host's message may give its number, past this topic's here: the numbers between were never
        // messages here (`previous` tells a history made now).
        let previous = state.sequence
        state.sequence = max(previous + 1, session.minimumSequence)
        let time = clock.stamp()
        state.lastPublished = time
        state.published += 1
        counters.messagesIn += 1
        counters.bytesIn += UInt64(payload.count)

        // Encoded once, into the batch; every subscriber is handed the same bytes.
        // The encoder's own bound: a smaller guess would let the frame grow the buffer, copying the whole batch.
        var frameSize = ByteBuffer.maximumMessageFrameSize(topic: topic.name, unit: session.unitField, payloadSize: payload.count)
        // Room for the fleet's copy too: the batch must not move while this publish holds ranges of it.
        let follower = session.isImporter ? nil : fleet.follower
        if follower != nil { frameSize *= 2 }
        if !batch.hasRoom(for: frameSize) {
            // What the histories take in is still in the batch's buffer.
            settleHistory()
            for session in sessionsToFlush { writeSpan(of: session) }
            batch.restart(minimumCapacity: frameSize, allocator: allocator)
        }
        let sequence = state.sequence
        var lineStart = 0
        let frame = batch.append { buffer in
            buffer.writeMessageFrame(
                .delivery,
                requestID: nil,
                topic: topic.name,
                sequence: sequence,
                time: time,
                uid: session.publisher.uid,
                pid: session.publisher.pid,
                unitField: session.unitField,
                payload: payload,
                lineStart: &lineStart
            )
        }

        // Each subscriber borrowed from the list, which is held through the loop: a reference counted per delivery
        // would be a tenth of a small one's cost.
        subscribers(of: state).withUnsafeBufferPointer { targets in
            for target in targets.indices {
                Unmanaged.passUnretained(targets[target].session)._withUnsafeGuaranteedRef { subscriber in
                    guard subscriber !== session || session.receivesOwnMessages else { return }
                    deliver(frame, of: state, sequence: sequence, payloadSize: payload.count, to: subscriber, overflow: targets[target].overflow)
                }
            }
        }

        let historyIndex = recordHistory(
            frame,
            lineStart: lineStart,
            of: state,
            sequence: sequence,
            after: previous,
            time: time,
            payloadSize: payload.count,
            by: session.account
        )
        if let follower {
            exportToFleet(topic, of: state, payload: payload, retain: options.retain, sequence: sequence, time: time, from: session, to: follower)
        }

        if options.retain {
            let owner = session.account
            // Whose buffered message this one replaces, when another uid's: its account may be forgotten, last.
            var previousOwner: UserAccount?
            // Where the message it replaces is kept: in the batch (the common case with history, a topic republished
            // within a batch), in a block, or in the history. The block is borrowed, as the state is: nothing here
            // lets go of it before it is done with (forgetting an account, which settles the batch, waits until the
            // end).
            if let pending = state.pendingRetained {
                previousOwner = replacePendingRetained(pendingHistory.messages[pending], by: owner)
            } else if let pointer = state.retainedBlockPointer {
                pointer._withUnsafeGuaranteedRef { block in
                    let payloadSize = block.payloadSize
                    topicTable.countRetained(topics: 0, payloadBytes: -payloadSize, frameBytes: -block.frameLength)
                    if block.isOwned(by: owner) {
                        owner.retainedBytes -= payloadSize
                    } else {
                        let previous = block.owner
                        previous.retainedBytes -= payloadSize
                        block.owner = owner
                        moveRetainedTopic(from: previous, to: owner)
                        previousOwner = previous
                    }
                }
            } else if state.retainedInHistory != 0 {
                previousOwner = replaceSharedRetained(of: state, by: owner)
            } else {
                topicTable.countRetained(topics: 1, payloadBytes: 0, frameBytes: 0)
                owner.retainedTopics += 1
            }
            if let historyIndex {
                // A mark on its record of the history, which the batch's end takes in (or, if the history does not
                // keep it, copies into a block then): no copy of it is made now.
                state.retainPending(at: historyIndex)
            } else if let pointer = state.retainedBlockPointer, pointer._withUnsafeGuaranteedRef({ $0.fits(frame.count) }) {
                pointer._withUnsafeGuaranteedRef { block in
                    batch.withBytes(frame) { block.replace(with: $0, payloadSize: payload.count, sequence: sequence) }
                }
            } else {
                state.retainInBlock(batch.withBytes(frame) {
                    RetainedMessage.make(frame: $0, payloadSize: payload.count, sequence: sequence, owner: owner)
                })
            }
            owner.retainedBytes += payload.count
            topicTable.countRetained(topics: 0, payloadBytes: payload.count, frameBytes: frame.count)
            if journal.log != nil {
                journal.markUnsaved(state)
                state.persistedSequence = max(state.persistedSequence, state.sequence)
            }
            // Last, with the topic whole: it settles the batch so far if the account is left empty (its own
            // messages may be on their way into histories), which may move this message into its history.
            if let previousOwner { forgetIfEmpty(previousOwner) }
        } else if let stateLog = journal.log, state.sequence > state.persistedSequence {
            state.persistedSequence = state.sequence + Broker.sequenceReserve
            stateLog.appendSequence(topic.name, state.persistedSequence)
        }
        if options.acknowledge {
            // An OK means the message is where the README says: a retained one, with a log, in it. (One sent
            // without retaining is promised delivery only, which it had.)
            if options.retain { awaitCommit(session) }
            replyOK(id, value: state.sequence, to: session)
        }
    }

    /// Takes `state`'s buffered message, a record of its history, off the counts, as one by `owner` replaces it.
    /// Once per topic and batch at most, and out of line: inlined, its search of the history made the whole of
    /// ``publish(_:payload:options:id:from:)`` some 7% slower, history or not.
    /// - Returns: the previous message's publisher, when not `owner`.
    @inline(never)
    private func replaceSharedRetained(of state: TopicState, by owner: UserAccount) -> UserAccount? {
        // The record itself, not ``TopicState/retained``: no reference counted on the way.
        guard let previous = state.history?.entry(sequence: state.retainedInHistory) else { return nil }
        topicTable.countRetained(topics: 0, payloadBytes: -previous.payloadSize, frameBytes: -previous.length)
        previous.owner.retainedBytes -= previous.payloadSize
        guard previous.owner !== owner else { return nil }
        moveRetainedTopic(from: previous.owner, to: owner)
        return previous.owner
    }

    /// Takes `previous`, a topic's buffered message still waiting in the batch, off the counts, as one by `owner`
    /// replaces it.
    /// - Returns: the previous message's publisher, when not `owner`.
    private func replacePendingRetained(_ previous: PendingHistory.Message, by owner: UserAccount) -> UserAccount? {
        topicTable.countRetained(topics: 0, payloadBytes: -previous.payloadSize, frameBytes: -previous.frame.count)
        return previous.owner._withUnsafeGuaranteedRef { previousOwner in
            previousOwner.retainedBytes -= previous.payloadSize
            guard previousOwner !== owner else { return nil }
            moveRetainedTopic(from: previousOwner, to: owner)
            return previousOwner
        }
    }

    /// Counts a topic's buffered message against `owner` instead of `previousOwner`, whose message it replaces.
    /// The caller then lets go of `previousOwner`'s account if that left it empty (``forgetIfEmpty(_:)``).
    private func moveRetainedTopic(from previousOwner: UserAccount, to owner: UserAccount) {
        previousOwner.retainedTopics -= 1
        owner.retainedTopics += 1
    }

    /// Why buffering `payloadSize` bytes as `topic`'s latest message by `account` would break
    /// ``BrokerConfiguration/maxRetainedBytes``, ``BrokerConfiguration/maxRetainedBytesPerUser`` or
    /// ``BrokerConfiguration/maxRetainedTopicsPerUser``, if it would:
    /// such a publish is refused whole, so the publisher learns that it was not kept.
    func retainRefusal(_ topic: Topic, payloadSize: Int, by account: UserAccount) -> String? {
        // Far from the limits, as usual, this costs no lookup of the topic.
        if topicTable.retainedBytes + UInt64(payloadSize) <= UInt64(configuration.maxRetainedBytes),
            account.retainedBytes + payloadSize <= configuration.maxRetainedBytesPerUser,
            account.retainedTopics < configuration.maxRetainedTopicsPerUser
        {
            return nil
        }
        let replaced = topicTable[topic.name].flatMap { bufferedOwnerAndSize(of: $0) }
        if account.retainedTopics >= configuration.maxRetainedTopicsPerUser && replaced?.owner !== account {
            return "uid \(account.uid) already has buffered messages in \(configuration.maxRetainedTopicsPerUser) topics (the limit"
                + " per user); clear some of its topics (notify clear, CLEAR), or publish without retaining (notify send --no-retain, noretain)"
        }
        let after = topicTable.retainedBytes - UInt64(replaced?.payloadSize ?? 0) + UInt64(payloadSize)
        if after > UInt64(configuration.maxRetainedBytes) {
            return "buffering this \(payloadSize)-byte message would take the daemon past \(configuration.maxRetainedBytes) bytes"
                + " of buffered messages (its limit); clear some (notify clear, CLEAR), or publish without retaining (notify send --no-retain, noretain)"
        }
        let ownReplaced = replaced?.owner === account ? replaced?.payloadSize ?? 0 : 0
        if account.retainedBytes - ownReplaced + payloadSize > configuration.maxRetainedBytesPerUser {
            return "buffering this \(payloadSize)-byte message would take uid \(account.uid) past"
                + " \(configuration.maxRetainedBytesPerUser) bytes of buffered messages it published (the limit per user);"
                + " clear some of its topics (notify clear, CLEAR), or publish without retaining (notify send --no-retain, noretain)"
        }
        return nil
    }

    /// Who published `state`'s buffered message and its payload's size, wherever it is kept: a message still in the
    /// batch is read there, not settled (a publisher at its limit takes this path at every publish, and settling
    /// each time would copy a burst into the history message by message).
    private func bufferedOwnerAndSize(of state: TopicState) -> (owner: UserAccount, payloadSize: Int)? {
        if let pending = state.pendingRetained {
            let message = pendingHistory.messages[pending]
            return (message.owner.takeUnretainedValue(), message.payloadSize)
        }
        return state.retained.map { ($0.owner, $0.payloadSize) }
    }

    /// The sessions that receive `state`'s messages, each once with its strictest overflow policy: its cached list,
    /// made again only after subscriptions changed (see ``SubscriberRouting``).
    @inline(__always)
    func subscribers(of state: TopicState) -> [SubscriberTarget] {
        if routing.isCurrent(state) { return state.subscribers }
        return makeSubscriberList(of: state)
    }

    @inline(never)
    private func makeSubscriberList(of state: TopicState) -> [SubscriberTarget] {
        let made = routing.makeList(
            of: state,
            policy: configuration.accessPolicy,
            bound: configuration.maxCachedSubscriberEntries,
            topics: topicTable
        )
        workDone &+= made.work
        return made.list
    }
}
