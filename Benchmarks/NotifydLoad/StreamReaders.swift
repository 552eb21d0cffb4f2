import Foundation
import NIOCore
import NIOPosix
import NIOWebSocket
import Synchronization

/// The events of some lines or messages of a stream, read where they are: `"event":"…"` found in each, and for a
/// drop the count after `"count":`.
struct EventTally {
    var messages = 0
    var dropped = 0
    var opened = false

    private static let event = Array(#""event":""#.utf8)
    private static let count = Array(#""count":"#.utf8)

    mutating func take(_ line: UnsafeRawBufferPointer) {
        guard let kind = EventTally.find(EventTally.event, in: line).map({ line[$0 + EventTally.event.count] }) else { return }
        switch kind {
        case UInt8(ascii: "m"): messages += 1
        case UInt8(ascii: "o"): opened = true
        case UInt8(ascii: "d"):
            guard let field = EventTally.find(EventTally.count, in: line) else { return }
            var value = 0
            for byte in line[(field + EventTally.count.count)...] {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { break }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            dropped += value
        default: return
        }
    }

    func report(to counter: StreamCounter) {
        if opened { counter.opened() }
        if messages > 0 || dropped > 0 { counter.count(messages: messages, dropped: dropped) }
    }

    /// Where `pattern` starts in `bytes`, with room for one byte after it.
    private static func find(_ pattern: [UInt8], in bytes: UnsafeRawBufferPointer) -> Int? {
        guard bytes.count > pattern.count else { return nil }
        let base = bytes.baseAddress!
        let last = bytes.count - pattern.count  // the last start that leaves a byte after the pattern, exclusive
        var at = 0
        while at < last, let hit = memchr(base + at, Int32(pattern[0]), last - at) {
            let start = base.distance(to: UnsafeRawPointer(hit))
            if pattern.withUnsafeBytes({ memcmp(base + start, $0.baseAddress!, pattern.count) }) == 0 { return start }
            at = start + 1
        }
        return nil
    }
}

/// A WebSocket reader on a plain TCP connection: the upgrade written by hand, NIO's frame decoder, each text
/// frame's event counted where it lies (hummingbird-websocket's client makes a string of each message, which
/// limited the rate measured more than the gateway did).
final class WebSocketCounter: ChannelInboundHandler, Sendable {
    typealias InboundIn = WebSocketFrame
    let counter: StreamCounter

    init(counter: StreamCounter) {
        self.counter = counter
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        guard frame.opcode == .text else { return }
        frame.unmaskedData.withUnsafeReadableBytes { counter.takeEvent($0) }
    }

    static func connect(port: Int, path: String, counter: StreamCounter) async throws -> any Channel {
        let head = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
            + "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
        return try await StreamReaders.connect(port: port, head: head) {
            [UpgradeResponseSkipper(), ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: 1 << 20)), WebSocketCounter(counter: counter)]
        }
    }
}

/// Drops the upgrade's response head (up to its blank line), then passes the frames' bytes on.
final class UpgradeResponseSkipper: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    private let tail = Mutex<(last: UInt32, done: Bool)>((0, false))

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        let skip: Int? = tail.withLock { tail -> Int? in
            if tail.done { return 0 }
            for (offset, byte) in buffer.readableBytesView.enumerated() {
                tail.last = tail.last << 8 | UInt32(byte)
                if tail.last == 0x0D0A_0D0A {
                    tail.done = true
                    return offset + 1
                }
            }
            return nil
        }
        guard let skip else { return }
        buffer.moveReaderIndex(forwardBy: skip)
        if buffer.readableBytes > 0 { context.fireChannelRead(wrapInboundOut(buffer)) }
    }
}

/// What the readers share: a connection to the gateway on loopback, its handlers, and the request written by hand.
enum StreamReaders {
    static func connect(port: Int, head: String, handlers: @escaping @Sendable () -> [any ChannelHandler]) async throws -> any Channel {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandlers(handlers()) }
            }
            .connect(host: "127.0.0.1", port: port).get()
        try await channel.writeAndFlush(ByteBuffer(string: head)).get()
        return channel
    }
}
