import NIOCore
import NIOSSL

/// The client's end of one connection to a NATS server, on its event loop: reads the server's operations from the
/// bytes as they come, answers its `PING`s, hands each message to its subscription, and completes a flush when the
/// `PONG` for its `PING` comes (the server answers them in order).
///
/// The operations are read here, in a loop over each read's bytes, rather than by a `ByteToMessageHandler` in
/// front: that handler passes each operation on as an `NIOAny` (a message boxed on the heap) through the pipeline,
/// which cost a subscriber of many messages more than reading them did.
final class NATSChannelHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// Where a subscription's messages go: a stream for `async` consumers, or a function called on the event loop.
    enum Receiver {
        case stream(AsyncThrowingStream<NATSMessage, any Error>.Continuation)
        case callback((NATSMessage) -> Void)
    }

    private let info: EventLoopPromise<String>
    private var context: ChannelHandlerContext?
    private var pongs: [EventLoopPromise<Void>] = []
    private var subscriptions: [String: Receiver] = [:]
    private var failure: NATSError?
    private let decoder: NATSServerDecoder
    /// What was read and not yet taken as operations: the start of one that has not all come.
    private var unread: ByteBuffer?
    /// The subject of the last message read, made again only when the next differs.
    private var lastSubject: String?
    /// Called once, when the connection is gone, with why.
    var onClosed: ((NATSError) -> Void)?
    /// Called when the connection takes writes again after it did not.
    var onWritable: (() -> Void)?
    /// The requests waiting for their replies.
    let requests = RequestInbox()

    /// `decoder` bounds what the server may send: a line, a message.
    init(info: EventLoopPromise<String>, decoder: NATSServerDecoder) {
        self.info = info
        self.decoder = decoder
    }

    var infoFuture: EventLoopFuture<String> { info.futureResult }

    var isWritable: Bool { context?.channel.isWritable ?? false }

    var isOpen: Bool { context != nil && failure == nil }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    /// Writes `operations` in one write; `written` completes once the bytes are handed to the kernel.
    func send(_ operations: [NATSClientOperation], written: EventLoopPromise<Void>?) {
        guard let context, failure == nil else {
            written?.fail(failure ?? NATSError("the connection to the NATS server is closed"))
            return
        }
        var buffer = context.channel.allocator.buffer(capacity: 128)
        for operation in operations { buffer.writeNATSOperation(operation) }
        context.writeAndFlush(wrapOutboundOut(buffer), promise: written)
    }

    /// Queues bytes already encoded, without flushing: a batch of writes goes out with one ``flush(confirmed:)``.
    func write(_ bytes: ByteBuffer) {
        guard let context, failure == nil else { return }
        context.write(wrapOutboundOut(bytes), promise: nil)
    }

    /// Sends what was written, asking nothing back.
    func flushWritten() {
        context?.flush()
    }

    /// Sends what was written, then a `PING`; `confirmed` completes when its `PONG` comes, so the server handled
    /// everything before it.
    func flush(confirmed: EventLoopPromise<Void>) {
        guard let context, failure == nil else {
            confirmed.fail(failure ?? NATSError("the connection to the NATS server is closed"))
            return
        }
        pongs.append(confirmed)
        var ping = context.channel.allocator.buffer(capacity: 6)
        ping.writeNATSOperation(.ping)
        context.writeAndFlush(wrapOutboundOut(ping), promise: nil)
    }

    /// Sends a `PING`; `pong` completes when its `PONG` comes, so everything sent before it was handled.
    func ping(_ pong: EventLoopPromise<Void>) {
        flush(confirmed: pong)
    }

    func addSubscription(_ sid: String, _ receiver: Receiver) {
        subscriptions[sid] = receiver
    }

    func removeSubscription(_ sid: String) {
        guard subscriptions.removeValue(forKey: sid) != nil else { return }
        send([.unsubscribe(sid: sid, maxMessages: nil)], written: nil)
    }

    func close() {
        context?.close(promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        if var kept = unread.take() {
            kept.writeBuffer(&bytes)
            bytes = kept
        }
        do {
            // Stops once the connection is closed (a callback may close it, or an -ERR did).
            while failure == nil, self.context != nil, let operation = try decoder.decode(buffer: &bytes, reusing: &lastSubject) {
                handle(operation, context: context)
            }
        } catch {
            failure = failure ?? NATSError("the NATS server sent what is not the NATS protocol: \(error)")
            context.close(promise: nil)
            return
        }
        guard bytes.readableBytes > 0, failure == nil else { return }
        // The start of an operation, kept for the next read (the decoder bounds it: a line, a message). A few bytes
        // would keep a whole receive buffer alive, and every payload sliced from it: copied out, unless most of the
        // buffer is that operation.
        if bytes.readableBytes < bytes.capacity / 2 {
            var copy = context.channel.allocator.buffer(capacity: max(bytes.readableBytes, 256))
            copy.writeBuffer(&bytes)
            unread = copy
        } else {
            unread = bytes
        }
    }

    private func handle(_ operation: NATSServerOperation, context: ChannelHandlerContext) {
        switch operation {
        case .info(let json):
            info.succeed(json)
        case .ping:
            send([.pong], written: nil)
        case .pong:
            if !pongs.isEmpty { pongs.removeFirst().succeed(()) }
        case .ok:
            break
        case .message(let message):
            switch subscriptions[message.sid] {
            case .stream(let continuation): continuation.yield(message)
            case .callback(let receive): receive(message)
            case nil: break
            }
        case .error(let text):
            // Most -ERRs close the connection; the others (a permissions violation) are closed here too, so that the
            // owner hears of it (its onClosed) instead of writing into a connection that drops what it is given.
            failure = failure ?? NATSError("the NATS server said: \(text)", isAuthorizationFailure: NATSError.isAuthorizationText(text))
            context.close(promise: nil)
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { onWritable?() }
        context.fireChannelWritabilityChanged()
    }

    /// Why the connection failed, once it did.
    var failureReason: NATSError? { failure }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        let sentence = error is NIOSSLError || error is BoringSSLError || error is NIOSSLExtraError
            ? "TLS with the NATS server failed (its certificate, name or protocol): \(error)"
            : "the connection to the NATS server failed: \(error)"
        failure = failure ?? NATSError(sentence)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        let error = failure ?? NATSError("the NATS server closed the connection")
        failure = error
        info.fail(error)
        for pong in pongs { pong.fail(error) }
        pongs.removeAll()
        requests.failAll(error)
        for receiver in subscriptions.values {
            if case .stream(let continuation) = receiver { continuation.finish(throwing: error) }
        }
        subscriptions.removeAll()
        self.context = nil
        let closed = onClosed
        onClosed = nil
        onWritable = nil
        closed?(error)
        context.fireChannelInactive()
    }
}

/// What went wrong with a NATS server: unreachable, refused, closed, or a request not answered.
public struct NATSError: Error, Sendable, CustomStringConvertible {
    public let description: String
    /// Whether the server refused the login (its `-ERR 'Authorization Violation'`, an expired or revoked user):
    /// trying again with the same credentials will not help.
    public let isAuthorizationFailure: Bool

    public init(_ description: String, isAuthorizationFailure: Bool = false) {
        self.description = description
        self.isAuthorizationFailure = isAuthorizationFailure
    }

    /// Whether a server's `-ERR` text is a refused login.
    static func isAuthorizationText(_ text: String) -> Bool {
        let lowered = text.lowercased()
        return lowered.contains("authorization violation") || lowered.contains("authentication")
    }
}
