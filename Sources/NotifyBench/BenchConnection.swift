import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import NotifyBus
import NotifySystem

/// One connection of a benchmark: a non-blocking Unix socket, its receive buffer, and the tally of what it
/// received. A benchmark drives all of its connections from one thread around one `poll` loop, as the C harness
/// does, so that it uses at most one core; this type is not thread-safe.
final class BenchConnection {
    /// The socket.
    let descriptor: CInt
    /// What the daemon announced on connect.
    private(set) var greeting = ServerGreeting(limits: .default)
    /// What the connection has received so far.
    var tally: DeliveryTally
    /// Whether the daemon closed the connection (or it failed).
    private(set) var isClosed = false
    /// Bytes received and not yet scanned: at most an incomplete frame between two reads.
    private var inbound: ByteBuffer

    /// Bytes asked of the kernel per read; the C harness reads 256 KiB at a time too.
    private static let readSize = 256 * 1024

    /// Connects to `path`, reads the greeting (within `timeout` nanoseconds), and makes the socket non-blocking.
    /// - Throws: ``NotifyClientError``, as ``NotifyConnection`` does.
    init(path: String, tally: DeliveryTally, timeout: UInt64 = 5_000_000_000) throws {
        // Connected blocking (a full backlog waits rather than fails), then read without blocking.
        let descriptor = try ClientSocket.connect(to: path)
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
        self.descriptor = descriptor
        self.tally = tally
        self.inbound = ByteBufferAllocator().buffer(capacity: BenchConnection.readSize)
        // A throwing initializer of a class that is fully initialized runs deinit, which closes the socket.
        greeting = try readGreeting(path: path, deadline: BenchmarkClock.now() + timeout)
    }

    deinit {
        POSIX.close(descriptor)
    }

    /// What happened to one read.
    enum ReceiveOutcome {
        /// Bytes came and were scanned.
        case received
        /// Nothing to read now.
        case wouldBlock
        /// The daemon closed the connection.
        case closed
    }

    /// Reads what the kernel has (one `read`), and scans the complete frames into ``tally``, stamped with the time
    /// the read returned.
    /// - Throws: ``NotifyClientError`` when the daemon sends what is not the protocol or the read fails.
    func receive() throws -> ReceiveOutcome {
        guard !isClosed else { return .closed }
        var count = 0
        inbound.writeWithUnsafeMutableBytes(minimumWritableBytes: BenchConnection.readSize) { space in
            count = POSIX.read(descriptor, space.baseAddress!, space.count)
            return max(count, 0)
        }
        if count < 0 {
            if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { return .wouldBlock }
            isClosed = true
            throw NotifyClientError(.connectionClosed, "could not read from the daemon: \(String(cString: strerror(errno)))")
        }
        if count == 0 {
            isClosed = true
            return .closed
        }
        do {
            try FrameScanner.scan(&inbound, into: &tally, at: BenchmarkClock.now())
        } catch {
            isClosed = true
            throw NotifyClientError(.protocolViolation, error.description)
        }
        // Keep the rest (an incomplete frame) at the front, so the next read has the whole buffer.
        if inbound.readableBytes == 0 { inbound.clear() } else { inbound.discardReadBytes() }
        return .received
    }

    /// Reads up to `reads` times while the socket has something.
    /// - Returns: false when the daemon closed the connection (or it failed).
    func drain(reads: Int) throws -> Bool {
        for _ in 0..<reads {
            do {
                switch try receive() {
                case .received: continue
                case .wouldBlock: return true
                case .closed: return false
                }
            } catch let error as NotifyClientError where error.kind == .connectionClosed {
                return false
            }
        }
        return true
    }

    /// What happened to one write.
    enum WriteOutcome {
        /// This many bytes were taken (at least one).
        case wrote(Int)
        /// The socket's buffer is full.
        case wouldBlock
    }

    /// Writes as much of `bytes` as the socket takes now.
    /// - Throws: ``NotifyClientError`` when the connection failed.
    func write(_ bytes: UnsafeRawBufferPointer) throws -> WriteOutcome {
        while true {
            let written = POSIX.sendWithoutSignal(descriptor, bytes.baseAddress!, bytes.count)
            if written > 0 { return .wrote(written) }
            if written < 0 && errno == EINTR { continue }
            if written < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return .wouldBlock }
            isClosed = true
            throw NotifyClientError(.connectionClosed, "could not send to the daemon: \(String(cString: strerror(errno)))")
        }
    }

    /// Writes all of `bytes`, waiting for the socket when it is full, until `deadline`.
    func writeAll(_ bytes: UnsafeRawBufferPointer, deadline: UInt64) throws {
        var offset = 0
        while offset < bytes.count {
            switch try write(UnsafeRawBufferPointer(rebasing: bytes[offset...])) {
            case .wrote(let count): offset += count
            case .wouldBlock:
                // Take what the daemon sent meanwhile: it stops reading from a connection that leaves its replies.
                _ = try receive()
                try waitFor(events: Int16(POLLOUT | POLLIN), until: deadline, doing: "sending to the daemon")
            }
        }
    }

    /// Receives until `condition` holds for ``tally``, or throws at `deadline` or when the connection ends.
    func receive(until condition: (DeliveryTally) -> Bool, deadline: UInt64, doing what: String) throws {
        while !condition(tally) {
            switch try receive() {
            case .received: continue
            case .wouldBlock: try waitFor(events: Int16(POLLIN), until: deadline, doing: what)
            case .closed: throw NotifyClientError(.connectionClosed, "the daemon closed the connection while \(what)")
            }
        }
    }

    private func waitFor(events: Int16, until deadline: UInt64, doing what: String) throws {
        let now = BenchmarkClock.now()
        guard now < deadline else {
            throw NotifyClientError(.connectionClosed, "the daemon did not answer in time while \(what)")
        }
        var entry = pollfd(fd: descriptor, events: events, revents: 0)
        _ = poll(&entry, 1, Int32(min((deadline - now) / 1_000_000 + 1, 1000)))
    }

    /// Reads the greeting with the full decoder (a refusal in its place is an `ERR`); bytes after it stay for the
    /// scanner.
    private func readGreeting(path: String, deadline: UInt64) throws -> ServerGreeting {
        var decoder = ServerFrameDecoder()
        while true {
            let frame: ServerFrame?
            do {
                frame = try decoder.decode(buffer: &inbound)
            } catch {
                throw NotifyClientError(.unreachable, "\(path) did not greet like a notifyd (\(error.reason)); is a notifyd listening there?")
            }
            switch frame {
            case .hello(let greeting)?:
                return greeting
            case .error(let refusal)?:
                throw NotifyClientError.refused(refusal)
            case .some:
                throw NotifyClientError(.unreachable, "\(path) did not greet like a notifyd; is a notifyd listening there?")
            case nil:
                break
            }
            var count = 0
            inbound.writeWithUnsafeMutableBytes(minimumWritableBytes: 4096) { space in
                count = POSIX.read(descriptor, space.baseAddress!, space.count)
                return max(count, 0)
            }
            if count == 0 {
                throw NotifyClientError(.unreachable, "\(path) accepted the connection but sent no greeting: is a notifyd listening there?")
            }
            if count < 0 {
                guard errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR else {
                    throw NotifyClientError(.unreachable, "could not read the greeting from \(path): \(String(cString: strerror(errno)))")
                }
                try waitFor(events: Int16(POLLIN), until: deadline, doing: "waiting for the greeting")
            }
        }
    }

    /// Opens `count` connections that subscribe to every one of `topics`, each starting with `tally`, and waits
    /// until the daemon has confirmed them all (a `PING` after the `SUB`s: replies keep request order).
    /// - Throws: ``NotifyClientError``; a refused `SUB` (a limit, a topic too long) as the daemon's refusal.
    static func openSubscribers(
        count: Int,
        path: String,
        topics: [Topic],
        tally: DeliveryTally,
        timeout: UInt64 = 30_000_000_000
    ) throws -> [BenchConnection] {
        var request = ByteBuffer()
        for topic in topics { request.writeRequest(Request(.subscribe(TopicPattern(topic), SubscribeOptions()))) }
        request.writeRequest(Request(.ping))
        let deadline = BenchmarkClock.now() + timeout
        let subscribers = try (0..<count).map { _ in try BenchConnection(path: path, tally: tally) }
        for subscriber in subscribers {
            try request.withUnsafeReadableBytes { try subscriber.writeAll($0, deadline: deadline) }
        }
        for subscriber in subscribers {
            try subscriber.receive(until: { $0.pongs > 0 || $0.errors > 0 }, deadline: deadline, doing: "subscribing")
            if let refusal = subscriber.tally.firstError { throw NotifyClientError.refused(refusal) }
        }
        return subscribers
    }
}
