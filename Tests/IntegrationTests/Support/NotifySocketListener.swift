import Foundation
import NIOCore
import Synchronization

/// Plays systemd's part of `sd_notify`: a datagram socket whose path goes into the daemon's `$NOTIFY_SOCKET`, and
/// the messages the daemon sends to it.
///
/// It reads from the moment it exists until it goes away, as systemd does, not only while a test waits: a Unix
/// datagram socket holds at most `net.unix.max_dgram_qlen` (10) unread messages, and past that `sd_notify` blocks
/// its caller, the daemon's event loop. A test that stopped reading after three watchdog pings once left the
/// daemon stuck there, deaf to the SIGTERM that was to end it.
final class NotifySocketListener: Sendable {
    let path: String
    private let descriptor: Int32
    private let inbox = Inbox()

    init(path: String) throws {
        self.path = path
        descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        let bound = try SocketAddress(unixDomainSocketPath: path).withSockAddr { bind(descriptor, $0, socklen_t($1)) }
        guard bound == 0 else {
            close(descriptor)
            throw TestFailure("cannot bind \(path): errno \(errno)")
        }
        // The thread holds the inbox, not the listener, so that the listener can go away and end it.
        Thread.detachNewThread { [descriptor, inbox] in
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
                if inbox.isClosed { break }
                if count < 0 && errno != EINTR { break }
                if count > 0 { inbox.append(String(decoding: buffer[..<count], as: UTF8.self)) }
            }
            close(descriptor)
        }
    }

    deinit {
        inbox.close()
        // Wakes the reading thread, which then closes the descriptor (closing it here could race its recv).
        shutdown(descriptor, Int32(SHUT_RDWR))
    }

    /// Every message received so far, in order.
    var messages: [String] { inbox.messages }
    /// When each message came, as its reading thread saw it: a test that looks later still sees the spacing.
    var arrivals: [ContinuousClock.Instant] { inbox.arrivals }

    /// Waits for the first message after those an earlier `wait` returned or passed over that satisfies `condition`,
    /// and returns it; fails after `timeout`.
    @discardableResult
    func wait(for what: String, timeout: Duration = .seconds(20), _ condition: @escaping @Sendable (String) -> Bool) async throws -> String {
        let inbox = self.inbox
        let (updates, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let id = inbox.addWaiter(continuation)
        defer { inbox.removeWaiter(id) }
        continuation.yield()  // look at what is there already
        do {
            return try await withDeadline(timeout, waitingFor: what) {
                for await _ in updates {
                    // The condition runs outside the lock: it may read `messages`.
                    while let (index, message) = inbox.unread() {
                        inbox.markRead(through: index)
                        if condition(message) { return message }
                    }
                }
                throw CancellationError()
            }
        } catch let failure as TestFailure {
            throw TestFailure("\(failure); got \(inbox.messages)")
        }
    }
}

/// What the listener received, and who waits for more.
private final class Inbox: Sendable {
    private struct State {
        var messages: [String] = []
        var arrivals: [ContinuousClock.Instant] = []
        /// How many messages a `wait` has looked at: the next one starts after them.
        var read = 0
        var closed = false
        var waiters: [UInt64: AsyncStream<Void>.Continuation] = [:]
        var nextWaiter: UInt64 = 0
    }

    private let state = Mutex(State())

    var messages: [String] { state.withLock { $0.messages } }
    var arrivals: [ContinuousClock.Instant] { state.withLock { $0.arrivals } }
    var isClosed: Bool { state.withLock { $0.closed } }

    func close() { state.withLock { $0.closed = true } }

    func append(_ message: String) {
        let now = ContinuousClock.now
        let waiters = state.withLock { state in
            state.messages.append(message)
            state.arrivals.append(now)
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.yield() }
    }

    /// The first message no `wait` has looked at yet, with its index.
    func unread() -> (Int, String)? {
        state.withLock { $0.read < $0.messages.count ? ($0.read, $0.messages[$0.read]) : nil }
    }

    func markRead(through index: Int) {
        state.withLock { $0.read = max($0.read, index + 1) }
    }

    func addWaiter(_ continuation: AsyncStream<Void>.Continuation) -> UInt64 {
        state.withLock { state in
            state.nextWaiter += 1
            state.waiters[state.nextWaiter] = continuation
            return state.nextWaiter
        }
    }

    func removeWaiter(_ id: UInt64) {
        let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
        waiter?.finish()
    }
}

/// The value of `NAME=` in an sd_notify message.
func field(_ name: String, in message: String) -> String? {
    message.split(separator: "\n").first { $0.hasPrefix(name + "=") }.map { String($0.dropFirst(name.count + 1)) }
}
