import NotifyBus

/// A typed subscription: the notifications of one type, decoded, as they come, with messages that did not decode
/// and notices of drops in their places among them: `for try await event in notifications`.
///
/// It holds what the subscription it is made of holds (at most its ``/NotifyBus/SubscriptionBufferLimits``; the daemon keeps
/// the rest, see ``/NotifyBus/NotifyClient/subscribe(to:latestFirst:since:overflow:buffer:)``), and inherits its reconnect and
/// resume: across a restart of the daemon it goes on after the last notification it delivered.
public struct Notifications<Message: NotifyMessage>: AsyncSequence, Sendable {
    /// What the sequence yields.
    public typealias Element = NotificationEvent<Message>

    let subscription: NotifySubscription
    let selection: NotificationSelection<Message>
    /// What ``values`` does with a message that does not decode: the center's `onUndecodable`.
    let reportUndecodable: @Sendable (UndecodableNotification) -> Void

    /// An iterator over the sequence.
    public func makeAsyncIterator() -> Iterator {
        Iterator(base: subscription.makeAsyncIterator(), selection: selection)
    }

    /// Decodes each message, and passes on those selected.
    public struct Iterator: AsyncIteratorProtocol {
        var base: NotifySubscription.Iterator
        let selection: NotificationSelection<Message>

        /// The next event; `for try await` calls it on its caller's executor (the main actor, say): a notification of
        /// the batch at hand is decoded and returned there, without a hop to the global executor and back.
        public mutating func next(isolation actor: isolated (any Actor)? = #isolation) async throws(any Error) -> NotificationEvent<Message>? {
            try await next()
        }

        /// The next element, on the caller's executor: nil at the end.
        public nonisolated(nonsending) mutating func next() async throws -> NotificationEvent<Message>? {
            while let event = try await base.next() {
                if let selected = selection.select(event) { return selected }
            }
            return nil
        }
    }

    /// How many messages wait for the consumer now, and their bytes (see ``/NotifyBus/NotifySubscription/buffered``).
    public var buffered: (events: Int, bytes: Int) { subscription.buffered }

    /// Only the notifications, for callers that do not care what was dropped: drop notices are left out, and a
    /// message that does not decode is skipped and reported as the center's observers report one (its
    /// `onUndecodable`; by default a line on standard error). By default any local user may publish to an ordinary
    /// topic: one message of another shape must not end every consumer's loop. The sequence ends only with the
    /// subscription (an error of the connection is thrown). ``strictValues`` ends at such a message instead.
    public var values: Values {
        Values(base: self, strict: false)
    }

    /// The notifications, like ``values``, but a message that does not decode ends the sequence: it is thrown, as
    /// its ``UndecodableNotification``. For a topic only trusted publishers may write (an access rule), where such a
    /// message means the two sides disagree on the type.
    public var strictValues: Values {
        Values(base: self, strict: true)
    }

    /// The notifications alone (``values``, ``strictValues``). Its iterator runs on its caller's executor, as
    /// ``Iterator`` does: a consumer on the main actor takes each notification there, with no hop per message.
    public struct Values: AsyncSequence, Sendable {
        /// What the sequence yields.
        public typealias Element = Received<Message>
        let base: Notifications<Message>
        /// Whether a message that does not decode ends the sequence (thrown) rather than being skipped and reported.
        let strict: Bool

        /// An iterator over the sequence.
        public func makeAsyncIterator() -> Iterator {
            Iterator(base: base.makeAsyncIterator(), strict: strict, report: base.reportUndecodable)
        }

        /// Takes the next notification, passing over notices of drops and what does not decode.
        public struct Iterator: AsyncIteratorProtocol {
            var base: Notifications<Message>.Iterator
            let strict: Bool
            let report: @Sendable (UndecodableNotification) -> Void

            /// The next element, taken on its caller's executor (`for try await` calls this form).
            public mutating func next(isolation actor: isolated (any Actor)? = #isolation) async throws(any Error) -> Received<Message>? {
                try await next()
            }

            /// The next element, on the caller's executor: nil at the end.
            public nonisolated(nonsending) mutating func next() async throws -> Received<Message>? {
                while let event = try await base.next() {
                    switch event {
                    case .notification(let received): return received
                    case .undecodable(let undecodable):
                        if strict { throw undecodable }
                        report(undecodable)
                    case .dropped: continue
                    }
                }
                return nil
            }
        }
    }

    /// `delivery` as a notification of this type, or why it is not one.
    static func decode(_ delivery: Delivery, with codec: NotifyCodec<Message>) -> Result<Received<Message>, UndecodableNotification> {
        do {
            let value = try codec.decode(delivery.payload)
            return .success(Received(
                value: value,
                topic: delivery.topic,
                sequence: delivery.sequence,
                time: delivery.time,
                publisher: delivery.publisher
            ))
        } catch {
            return .failure(UndecodableNotification(
                delivery: delivery,
                expectedType: String(describing: Message.self),
                reason: "\(codec.name): \(error)"
            ))
        }
    }
}

/// What a typed subscription or observer passes on of its subscription's events: each message decoded, unless it is
/// not from `sender`, is one of the center's own posts, or is not `isIncluded`; notices of drops as they are.
struct NotificationSelection<Message: NotifyMessage>: Sendable {
    let codec: NotifyCodec<Message>
    let isIncluded: (@Sendable (Message) -> Bool)?
    let sender: Sender?
    let ownPosts: OwnPosts

    /// The event to pass on for `event`; nil for a message left out.
    func select(_ event: SubscriptionEvent) -> NotificationEvent<Message>? {
        switch event {
        case .dropped(let notice):
            return .dropped(notice)
        case .message(let delivery):
            if let sender, !sender.matches(delivery.publisher) { return nil }
            if ownPosts.contains(delivery) { return nil }
            switch Notifications<Message>.decode(delivery, with: codec) {
            case .success(let received):
                if let isIncluded, !isIncluded(received.value) { return nil }
                return .notification(received)
            case .failure(let undecodable):
                return .undecodable(undecodable)
            }
        }
    }
}
