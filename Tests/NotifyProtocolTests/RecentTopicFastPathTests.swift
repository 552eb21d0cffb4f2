import NIOCore
import Testing

@testable import NotifyProtocol

/// The decoder reads `PUB <its last topic> <size>\n` and the payload without its general line parser; every frame,
/// whole or cut anywhere, must decode exactly as it does the general way (no socket).
@Suite("Publish to the last topic, read the short way", .timeLimit(.minutes(3)))
struct RecentTopicFastPathTests {
    /// Frames that follow a `PUB t.x …`: the short way's form, and every near miss of it.
    static let frames = [
        "PUB t.x 5\nhello\n", "PUB t.x 0\n\n", "PUB t.x 05\nhello\n", "PUB t.x 5\nhello!", "PUB t.x 5\r\nhello\n",
        "PUB t.x 5\nhello\r\n", "PUB t.x 5 ack\nhello\n", "PUB t.x 5 noretain\nhello\n", "#3 PUB t.x 5\nhello\n",
        "pub t.x 5\nhello\n", "PUB  t.x 5\nhello\n", "PUB t.x  5\nhello\n", "PUB t.xy 5\nhello\n", "PUB t. 5\nhello\n",
        "PUB t.x 99999999999\nx\n", "PUB t.x 1048577\nx\n", "PUB t.x 1048576\n", "PUB t.x\nhello\n", "PUB t.x \nhello\n",
        "PUB t.x 1a\nx\n", "PUB t.x 5\n", "PUB t.x", "PUB ", "PUB t.x 5\nhello\nPUB t.x 1\nz\n", "SUB t.x\n",
        "PUB t.x 5 NORETAIN\nhello\n", "PUB t.x 5 noretain ack\nhello\n", "PUB t.x 5 noretainx\nhello\n",
        "PUB t.x 5 noretai\nhello\n", "PUB t.x 5  noretain\nhello\n", "PUB t.x 5 noretain\r\nhello\n",
        "PUB t.x 5 noretain\nhello!", "PUB t.x 5 noretain", "PUB t.x 5 \nhello\n", "PUB t.x noretain\nhello\n",
    ]

    /// What a decoder whose last topic is `last` makes of `text`: every frame it returns, and how far it read.
    static func decode(_ text: String, after last: String) -> ([DecodedFrame?], Int) {
        var decoder = RequestDecoder()
        var prime = ByteBuffer(string: "PUB \(last) 1\na\n")
        _ = decoder.decodeInPlace(buffer: &prime)
        var buffer = ByteBuffer(string: text)
        var frames: [DecodedFrame?] = []
        for _ in 0..<3 {
            let frame = decoder.decodeInPlace(buffer: &buffer)
            frames.append(frame)
            if frame == nil { break }
        }
        return (frames, buffer.readerIndex)
    }

    @Test("every frame, and every cut of it, decodes the same after a publish to its topic as after one to another")
    func sameAsTheGeneralWay() {
        var shortWayTaken = 0
        for frame in Self.frames {
            let bytes = Array(frame.utf8)
            for cut in 0...bytes.count {
                let text = String(decoding: bytes[0..<cut], as: UTF8.self)
                let (short, shortRead) = Self.decode(text, after: "t.x")
                let (general, generalRead) = Self.decode(text, after: "other.topic")
                #expect(short == general, "\(text.debugDescription)")
                #expect(shortRead == generalRead, "\(text.debugDescription)")
                if case .publish? = short.first { shortWayTaken += 1 }
            }
        }
        #expect(shortWayTaken >= 5, "the short way's form is among the cases")
    }
}
