public import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import NotifyProtocol
import NotifySystem

/// A blocking connection to notifyd for one-shot work: publish a message, read or clear a buffered one, read the
/// counters, and exit.
///
/// It starts no threads and needs no async context, which is what makes `notify send` cheap in a shell loop; the
/// codec is the same as ``NotifyClient``'s. For subscriptions and long-lived use, take ``NotifyClient``.
///
/// It does not reconnect: a call after the daemon went away throws, and one-shot work simply connects again (a
/// subscription that must outlive restarts is a ``ResumingSubscription``).
///
/// Not thread-safe: use it from one thread at a time.
public final class NotifyConnection {
    /// The socket connected to.
    public let socketPath: String
    /// What the daemon announced on connect.
    public private(set) var greeting = ServerGreeting(limits: .default)

    private var descriptor: CInt
    private var reader = BlockingFrameReader()
    private var nextRequestID: UInt64 = 1

    /// Connects to the daemon and reads its greeting.
    /// - Parameter socketPath: the socket; nil resolves it as ``/NotifyProtocol/SocketPath/resolveForClient(explicit:environment:uid:)`` says.
    /// - Throws: ``NotifyClientError``.
    public init(to socketPath: String? = nil) throws {
        let path = SocketPath.resolveForClient(explicit: socketPath)
        if let problem = SocketPath.fallbackProblem(path) {
            throw NotifyClientError(.notPermitted, problem)
        }
        self.socketPath = path
        descriptor = try ClientSocket.connect(to: path)
        if let problem = SocketPath.fallbackPeerProblem(path, peerUID: POSIX.peerCredentials(of: descriptor)?.uid) {
            close()
            throw NotifyClientError(.notPermitted, problem)
        }
        let first: ServerFrame
        do {
            first = try nextFrame()
        } catch {
            close()
            throw error
        }
        if case .error(let refusal) = first {
            // A daemon at a connection limit answers with an `ERR` instead of its greeting.
            close()
            throw NotifyClientError.refused(refusal)
        }
        guard case .hello(let greeting) = first else {
            close()
            throw NotifyClientError(.unreachable, "\(path) did not greet like a notifyd; is a notifyd listening there?")
        }
        self.greeting = greeting
    }

    deinit { close() }

    /// Publishes `payload` to `topic` and waits until the daemon accepted it.
    /// - Returns: the message's sequence number within its topic.
    @discardableResult
    public func publishAcknowledged(_ payload: ByteBuffer, to topic: Topic, retain: Bool = true) throws -> UInt64 {
        if payload.readableBytes > greeting.limits.maxPayload {
            throw NotifyClientError.payloadTooLarge(payload.readableBytes, limit: greeting.limits.maxPayload)
        }
        let reply = try exchange(.publish(topic, payload: payload, PublishOptions(retain: retain, acknowledge: true)))
        guard case .ok(_, let sequence?) = reply else { throw NotifyClientError.unexpected(reply, for: "PUB ack") }
        return sequence
    }

    /// The buffered latest message of `topic`, or nil when nothing is buffered.
    public func latest(_ topic: Topic) throws -> Delivery? {
        do {
            let reply = try exchange(.latest(topic))
            guard case .latest(_, let delivery) = reply else { throw NotifyClientError.unexpected(reply, for: "LATEST") }
            return delivery
        } catch let error as NotifyClientError where error.refusal?.code == .notFound {
            return nil
        }
    }

    /// Forgets the buffered message of `topic` without sending anything.
    public func clear(_ topic: Topic) throws {
        let reply = try exchange(.clear(topic))
        guard case .ok = reply else { throw NotifyClientError.unexpected(reply, for: "CLEAR") }
    }

    /// The topics the daemon knows, all or those matching `pattern`, in name order.
    public func topics(matching pattern: TopicPattern? = nil) throws -> [TopicInfo] {
        var all: [TopicInfo] = []
        var after: Topic?
        while true {
            let reply = try exchange(.topics(pattern, after: after))
            guard case .topics(_, let page) = reply else { throw NotifyClientError.unexpected(reply, for: "TOPICS") }
            all += page
            after = Command.topicsPage(after: page, serverVersion: greeting.version)
            if after == nil { return all }
        }
    }

    /// The daemon's counters.
    public func stats() throws -> ServerStats {
        let reply = try exchange(.stats)
        guard case .stats(_, let stats) = reply else { throw NotifyClientError.unexpected(reply, for: "STATS") }
        return stats
    }

    /// Which rules decide publishing to and reading `topic`: for this connection's peer, or for `uid` (root only).
    public func explain(_ topic: String, uid: UInt32? = nil) throws -> AccessExplanation {
        let reply = try exchange(.explain(try Topic(topic), uid: uid))
        guard case .explanation(_, let explanation) = reply else { throw NotifyClientError.unexpected(reply, for: "EXPLAIN") }
        return explanation
    }

    /// Closes the connection; further calls fail.
    public func close() {
        if descriptor >= 0 {
            POSIX.close(descriptor)
            descriptor = -1
        }
    }

    // MARK: - Internals

    /// Sends `command` and reads until its reply; an `ERR` reply is thrown.
    private func exchange(_ command: Command) throws -> ServerFrame {
        let id = nextRequestID
        nextRequestID += 1
        var request = ByteBuffer()
        request.writeRequest(Request(id: id, command))
        try send(request)
        while true {
            let frame = try nextFrame()
            switch frame {
            case .error(let error) where error.requestID == id || error.requestID == nil:
                throw NotifyClientError.refused(error)
            case .ok(let replyID?, _), .pong(let replyID?), .latest(let replyID?, _), .topics(let replyID?, _),
                .stats(let replyID?, _), .explanation(let replyID?, _):
                if replyID == id { return frame }
            default:
                continue  // deliveries and replies to nothing of ours
            }
        }
    }

    private func send(_ buffer: ByteBuffer) throws {
        guard descriptor >= 0 else { throw NotifyClientError(.connectionClosed, "the connection is closed") }
        // Without SIGPIPE: a daemon that went away must give an error, not kill the process.
        if let code = POSIX.writeAll(descriptor, buffer, POSIX.sendWithoutSignal) {
            throw NotifyClientError(.connectionClosed, "could not send to the daemon: \(String(cString: strerror(code)))")
        }
    }

    private func nextFrame() throws -> ServerFrame {
        guard descriptor >= 0 else { throw NotifyClientError(.connectionClosed, "the connection is closed") }
        do {
            return try reader.next(from: descriptor)
        } catch {
            switch error {
            case .malformed(let reason): throw NotifyClientError(.protocolViolation, reason)
            case .readFailed(let code):
                throw NotifyClientError(.connectionClosed, "could not read from the daemon: \(String(cString: strerror(code)))")
            case .closed: throw NotifyClientError(.connectionClosed, "the daemon closed the connection (did it stop?)")
            }
        }
    }
}
