import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOWebSocket

/// How a ``StreamResponder``'s stream goes on the wire: the parts it reads and writes, and how its events, end and
/// refusals are framed.
protocol StreamTransport: SendableMetatype {
    associatedtype InboundIn
    associatedtype OutboundOut

    /// Whether this is a WebSocket's, once upgraded.
    static var isWebSocket: Bool { get }
    /// Whether the request's decoder is let go of once the head is read.
    static var dropsDecoderAfterHead: Bool { get }
    /// The request's head, if `part` is one.
    static func head(of part: InboundIn) -> HTTPRequestHead?
    /// What to answer the client's `part` while streaming, and whether it ends the stream.
    static func reply(to part: InboundIn) -> (answer: OutboundOut?, ends: Bool)
    /// Whether `part` answers a ``ping``.
    static func isPong(_ part: InboundIn) -> Bool
    /// What asks an idle client whether it is still there (a WebSocket's ping); nil where TCP alone tells.
    static var ping: OutboundOut? { get }
    /// What goes before the stream's first event.
    static func start(version: HTTPVersion, format: StreamFormat) -> OutboundOut?
    /// Hands `events`, framed as `format` says and written into one buffer, to `write`: returns their bytes.
    @discardableResult
    static func write(_ events: [GatewayEvent], format: StreamFormat, allocator: ByteBufferAllocator, to write: (OutboundOut) -> Void) -> Int
    /// The parts that say `refusal`, to its last (never none).
    static func refusal(_ refusal: GatewayError, version: HTTPVersion) -> [OutboundOut]
    /// The stream's last part: after a refusal, or when its subscription ended or the gateway stops.
    static var end: OutboundOut { get }
}

/// A stream as an HTTP/1 response: its events in its body, gathered into one write.
enum HTTPStreamTransport: StreamTransport {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    static var isWebSocket: Bool { false }
    static var dropsDecoderAfterHead: Bool { true }

    static func head(of part: HTTPServerRequestPart) -> HTTPRequestHead? {
        guard case .head(let head) = part else { return nil }
        return head
    }

    static func reply(to part: HTTPServerRequestPart) -> (answer: HTTPServerResponsePart?, ends: Bool) { (nil, false) }
    static func isPong(_ part: HTTPServerRequestPart) -> Bool { false }
    static var ping: HTTPServerResponsePart? { nil }

    static func start(version: HTTPVersion, format: StreamFormat) -> HTTPServerResponsePart? {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: format.contentType)
        headers.add(name: "Cache-Control", value: "no-cache")
        return .head(HTTPResponseHead(version: version, status: .ok, headers: headers))
    }

    static func write(_ events: [GatewayEvent], format: StreamFormat, allocator: ByteBufferAllocator, to write: (HTTPServerResponsePart) -> Void) -> Int {
        // Room for a take's events at once, as most are: a buffer grown as it is written copies itself each time.
        var batch = allocator.buffer(capacity: events.count * 320)
        for event in events { format.write(event, into: &batch) }
        // A raw stream's `open` is an empty line; one with nothing at all writes nothing.
        if batch.readableBytes > 0 { write(.body(.byteBuffer(batch))) }
        return batch.readableBytes
    }

    static func refusal(_ refusal: GatewayError, version: HTTPVersion) -> [HTTPServerResponsePart] {
        var body = ByteBuffer()
        refusal.writeBody(into: &body)
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        headers.add(name: "Content-Length", value: String(body.readableBytes))
        headers.add(name: "Connection", value: "close")
        let status = HTTPResponseStatus(statusCode: Int(refusal.status.code), reasonPhrase: refusal.status.reasonPhrase)
        return [.head(HTTPResponseHead(version: version, status: status, headers: headers)), .body(.byteBuffer(body)), .end(nil)]
    }

    static var end: HTTPServerResponsePart { .end(nil) }
}

/// A stream as a WebSocket (ntfy's): each event a text message of its own. The frames are written here, into one
/// buffer for a take's events (NIO's encoder, taken out at the upgrade, writes a header of its own per frame: two
/// pieces of a write for each event).
enum WebSocketStreamTransport: StreamTransport {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = ByteBuffer

    static var isWebSocket: Bool { true }
    static var dropsDecoderAfterHead: Bool { false }

    static func head(of part: WebSocketFrame) -> HTTPRequestHead? { nil }

    /// A ping is answered; the client's close is echoed, and ends the stream; the rest is not read as requests.
    static func reply(to frame: WebSocketFrame) -> (answer: ByteBuffer?, ends: Bool) {
        switch frame.opcode {
        case .ping: (framed(.pong, frame.unmaskedData), false)
        case .connectionClose: (framed(.connectionClose, frame.unmaskedData), true)
        default: (nil, false)
        }
    }

    static func isPong(_ frame: WebSocketFrame) -> Bool { frame.opcode == .pong }

    /// A ping at each keepalive's interval; a client that has not answered the last by the next is gone (as
    /// hummingbird-websocket's routes judged it).
    static var ping: ByteBuffer? { framed(.ping, ByteBuffer()) }

    static func start(version: HTTPVersion, format: StreamFormat) -> ByteBuffer? { nil }

    static func write(_ events: [GatewayEvent], format: StreamFormat, allocator: ByteBufferAllocator, to write: (ByteBuffer) -> Void) -> Int {
        var batch = allocator.buffer(capacity: events.count * 320)
        for event in events {
            // The payload written after room for the header most events take (126 and 16 bits: 126 to 65,535
            // bytes), which is then written in place; a payload of another length is moved to fit its own.
            let start = batch.writerIndex
            batch.writeRepeatingByte(0, count: 4)
            format.write(event, into: &batch)
            let length = batch.writerIndex - start - 4
            if (126..<65_536).contains(length) {
                batch.setInteger(UInt8(0x80) | UInt8(webSocketOpcode: .text), at: start)
                batch.setInteger(UInt8(126), at: start + 1)
                batch.setInteger(UInt16(length), at: start + 2)
            } else {
                let payload = batch.getBytes(at: start + 4, length: length)!
                batch.moveWriterIndex(to: start)
                writeHeader(.text, length: length, into: &batch)
                batch.writeBytes(payload)
            }
        }
        write(batch)
        return batch.readableBytes
    }

    /// After the upgrade, a refusal is a close (``GatewayError/webSocketClose``).
    static func refusal(_ refusal: GatewayError, version: HTTPVersion) -> [ByteBuffer] {
        let close = refusal.webSocketClose
        return [Self.close(close.code, reason: close.reason)]
    }

    /// The close that ends the stream when its subscription ended or the gateway stops: 1000, as the routes' did.
    static var end: ByteBuffer { close(.normalClosure, reason: "") }

    static func close(_ code: WebSocketErrorCode, reason: String) -> ByteBuffer {
        var data = ByteBuffer()
        data.write(webSocketErrorCode: code)
        data.writeString(reason)
        return framed(.connectionClose, data)
    }

    /// One whole frame from the server (final, unmasked) holding `payload`.
    static func framed(_ opcode: WebSocketOpcode, _ payload: ByteBuffer) -> ByteBuffer {
        var frame = ByteBuffer()
        writeHeader(opcode, length: payload.readableBytes, into: &frame)
        frame.writeImmutableBuffer(payload)
        return frame
    }

    /// RFC 6455's header of a final, unmasked frame: the opcode, then the length in 7 bits, or 126 and 16 bits, or
    /// 127 and 64 bits.
    static func writeHeader(_ opcode: WebSocketOpcode, length: Int, into buffer: inout ByteBuffer) {
        buffer.writeInteger(UInt8(0x80) | UInt8(webSocketOpcode: opcode))
        switch length {
        case ..<126:
            buffer.writeInteger(UInt8(length))
        case ..<65_536:
            buffer.writeInteger(UInt8(126))
            buffer.writeInteger(UInt16(length))
        default:
            buffer.writeInteger(UInt8(127))
            buffer.writeInteger(UInt64(length))
        }
    }
}
