import NIOCore
import NIOHTTP1

/// Sends a new connection, by its first request line, one of two ways: a stream (`GET /<topics>/json|sse|raw`, not a
/// poll, or `/ws`) to a ``StreamResponder`` on the connection's event loop, anything else to Hummingbird's HTTP and WebSocket
/// channel. A stream served by Hummingbird's responder holds the task that serves its connection and every async
/// frame of the path to it (the router, the middlewares: about 15 KB, kept for as long as the stream is open); one
/// served by a `StreamResponder` holds no task at all. What this cannot read as a stream's request line (longer than
/// ``maxLine``, another method or path, a later request on a kept-alive connection) goes to Hummingbird, which
/// answers it as it answers any request.
final class FirstRequestRouter: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    /// The most bytes read for a request line before the connection goes to Hummingbird.
    static var maxLine: Int { 8 << 10 }

    /// Makes the connection's pipeline, set up for Hummingbird, serve `format`'s stream instead.
    private let serveStream: (StreamFormat) throws -> Void
    private var buffered: ByteBuffer?
    private let decided: EventLoopPromise<Bool>

    /// Whether Hummingbird's channel serves the connection: false once a ``StreamResponder`` does, or it closed first.
    var servedByHummingbird: EventLoopFuture<Bool> { decided.futureResult }

    init(eventLoop: any EventLoop, serveStream: @escaping (StreamFormat) throws -> Void) {
        self.serveStream = serveStream
        self.decided = eventLoop.makePromise()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        if buffered == nil {
            buffered = bytes
        } else {
            buffered!.writeBuffer(&bytes)
        }
        guard let buffered else { return }
        if let line = StreamRequestLine.firstLine(of: buffered) {
            send(context, as: StreamRequestLine(line: line)?.format)
        } else if buffered.readableBytes > Self.maxLine {
            send(context, as: nil)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // The client closed its side before a whole line: Hummingbird answers (or closes) what it sent, and is told
        // of the close after it, before this leaves (a handler removed passes nothing on).
        if case ChannelEvent.inputClosed = event, buffered != nil {
            send(context, as: nil, then: event)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        decided.succeed(false)
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        decided.succeed(false)
    }

    /// Sets up `format`'s stream, or leaves the connection to Hummingbird for nil; hands on what was read, and leaves.
    private func send(_ context: ChannelHandlerContext, as format: StreamFormat?, then event: Any? = nil) {
        if let format {
            do {
                try serveStream(format)
            } catch {
                decided.fail(error)
                context.close(promise: nil)
                return
            }
        }
        decided.succeed(format == nil)
        handOver(context, then: event)
    }

    /// Hands what was read to the handlers after this one, then `event`, and leaves.
    private func handOver(_ context: ChannelHandlerContext, then event: Any? = nil) {
        if let buffered {
            self.buffered = nil
            context.fireChannelRead(wrapInboundOut(buffered))
            // Hummingbird's channel hands on what it read at the end of a read: the bytes are one.
            context.fireChannelReadComplete()
        }
        if let event { context.fireUserInboundEventTriggered(event) }
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }
}

/// A request line that asks for a stream the ``StreamResponder`` serves: `GET /<topics>/json|sse|raw|ws` over
/// HTTP/1, without `poll`.
struct StreamRequestLine {
    let format: StreamFormat

    /// The line that starts `buffer` (line breaks before it skipped, as HTTP's parsers do), once it is whole.
    static func firstLine(of buffer: ByteBuffer) -> Substring? {
        let bytes = buffer.readableBytesView
        guard let start = bytes.firstIndex(where: { $0 != UInt8(ascii: "\r") && $0 != UInt8(ascii: "\n") }),
            let end = bytes[start...].firstIndex(of: UInt8(ascii: "\n"))
        else { return nil }
        var line = bytes[start..<end]
        if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
        return Substring(decoding: line, as: UTF8.self)
    }

    /// The request `line`'s stream, if it asks for one.
    init?(line: Substring) {
        let parts = line.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "GET", parts[2] == "HTTP/1.1" || parts[2] == "HTTP/1.0" else { return nil }
        let target = parts[1]
        let path = target.prefix { $0 != "?" }
        let query = target.dropFirst(path.count)
        guard !query.contains("poll="), path.first == "/" else { return nil }
        let segments = path.dropFirst().split(separator: "/", omittingEmptySubsequences: false)
        guard segments.count == 2, !segments[0].isEmpty,
            let format = segments[1] == "ws" ? .webSocket : StreamFormat.httpStreams.first(where: { $0.rawValue == segments[1] })
        else { return nil }
        self.format = format
    }
}
