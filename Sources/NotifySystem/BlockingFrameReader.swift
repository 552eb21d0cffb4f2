import NIOCore
package import NotifyProtocol

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads a daemon's frames from a blocking socket, one at a time: what `NotifyConnection` and `notifyd --reload`
/// share. The frame decoder bounds what a frame may claim, so a peer that sends garbage costs at most one frame's
/// room.
package struct BlockingFrameReader {
    /// Why no frame came.
    package enum Failure: Error {
        /// The bytes are not a frame of the protocol.
        case malformed(String)
        /// The read failed with this `errno`.
        case readFailed(CInt)
        /// The daemon closed the connection.
        case closed
    }

    private var inbound = ByteBuffer()
    private var decoder = ServerFrameDecoder()

    package init() {}

    /// The room the reader holds now, read or not.
    package var capacity: Int { inbound.capacity }

    /// The next frame, read from `descriptor` as far as it takes.
    package mutating func next(from descriptor: CInt) throws(Failure) -> ServerFrame {
        while true {
            do {
                if let frame = try decoder.decode(buffer: &inbound) { return frame }
            } catch {
                throw .malformed(error.description)
            }
            // What was read is let go of before reading more: a connection that lives long (a gateway's, a
            // service's) would otherwise grow its buffer by every reply it ever read.
            if inbound.readableBytes == 0 {
                inbound.clear()
            } else if inbound.readerIndex >= 65_536 {
                inbound.discardReadBytes()
            }
            var count = 0
            inbound.writeWithUnsafeMutableBytes(minimumWritableBytes: 65_536) { space in
                count = POSIX.read(descriptor, space.baseAddress!, space.count)
                return max(count, 0)
            }
            if count < 0 {
                if errno == EINTR { continue }
                throw .readFailed(errno)
            }
            if count == 0 { throw .closed }
        }
    }
}
