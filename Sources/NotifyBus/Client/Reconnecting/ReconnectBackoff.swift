import NotifyProtocol

/// The pauses of a client that connects again after losing its connection: from 50 ms, doubling up to 2 s, each
/// with jitter, so that the clients of a daemon that restarts do not all come back in the same millisecond.
///
/// A connection that is made and then lost again at once (a daemon that greets and closes, one that crashes at
/// every start) does not start the pauses over: they start over only after a connection lasted
/// ``stableConnection``, as the daemon's NATS bridge does. Without that, a client reconnected as fast as the
/// daemon could greet it, hundreds of times a second.
struct ReconnectBackoff: Sendable {
    /// The first pause.
    static let first: Duration = .milliseconds(50)
    /// The longest pause.
    static let longest: Duration = .seconds(2)
    /// How long a connection must have lasted for the pauses to start over when it is lost.
    static let stableConnection: Duration = .seconds(10)

    /// The pause the next ``pause()`` is drawn from: it waits between half of it and all of it.
    private(set) var step: Duration = ReconnectBackoff.first

    /// The next pause, and the step doubled for the one after.
    mutating func pause() -> Duration {
        var generator = SystemRandomNumberGenerator()
        return pause(using: &generator)
    }

    /// The same, drawing the jitter from `generator` (tests).
    mutating func pause(using generator: inout some RandomNumberGenerator) -> Duration {
        let pause = step * Double.random(in: 0.5...1, using: &generator)
        step = min(step * 2, Self.longest)
        return pause
    }

    /// A connection that lasted `lasted` was lost: the pause before connecting again, nil to connect at once (it
    /// lasted ``stableConnection``, so the pauses start over).
    mutating func lost(after lasted: Duration) -> Duration? {
        if lasted >= Self.stableConnection {
            step = Self.first
            return nil
        }
        return pause()
    }
}
