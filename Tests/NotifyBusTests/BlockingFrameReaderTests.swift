import NIOCore
import NotifyProtocol
import NotifySystem
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The blocking reader that `NotifyConnection` and `notifyd --reload` share, over a socket pair.
@Suite("Blocking frame reader", .timeLimit(.minutes(1)))
struct BlockingFrameReaderTests {
    @Test("a long-lived connection's buffer does not grow with every reply it reads")
    func bounded() throws {
        var pair: [Int32] = [0, 0]
        try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0)
        defer {
            _ = close(pair[0])
            _ = close(pair[1])
        }
        var reader = BlockingFrameReader()
        var most = 0
        // 2,000 replies of 1 KiB, written and read one at a time as a blocking client's requests are: 2 MB in all.
        let text = String(repeating: "x", count: 1_024)
        for number in 1...2_000 {
            var frame = ByteBuffer()
            frame.writeDelivery(Delivery(topic: try Topic("t"), sequence: UInt64(number), time: PublishTime(microsecondsSinceEpoch: 1), publisher: Publisher(uid: 1, pid: 1), payload: ByteBuffer(string: text)))
            try #require(frame.withUnsafeReadableBytes { write(pair[1], $0.baseAddress, $0.count) } == frame.readableBytes)
            guard case .delivery(let delivery) = try reader.next(from: pair[0]) else {
                Issue.record("not a delivery")
                return
            }
            #expect(delivery.sequence == UInt64(number))
            most = max(most, reader.capacity)
        }
        #expect(most <= 256 * 1_024, "the reader held \(most) bytes at most")
    }
}
