import NIOCore
import NotifyProtocol
import NotifySystem

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A connection to a running notifyd that asks for its `STATS`, for `notifyd --reload`: the protocol's own codecs
/// over a blocking socket. The daemon is a peer of the client library, not a user of it, so it asks with these
/// few lines instead of linking the client.
final class StatsQuery {
    /// Why the daemon could not be asked, in a sentence.
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    private let descriptor: CInt
    private var reader = BlockingFrameReader()
    private var nextRequestID: UInt64 = 1

    /// Connects to the daemon at `socketPath` and reads its greeting.
    init(socketPath: String) throws(Failure) {
        do {
            descriptor = try UnixSocket.connect(to: socketPath)
        } catch {
            throw Failure(description: "cannot connect to \(socketPath): \(String(cString: strerror(error.errnoCode)))")
        }
        do throws(Failure) {
            switch try next() {
            case .hello: return
            case .error(let refusal): throw Failure(description: "notifyd at \(socketPath) refused the connection: \(refusal)")
            default: throw Failure(description: "\(socketPath) did not greet like a notifyd")
            }
        } catch {
            POSIX.close(descriptor)
            throw error
        }
    }

    deinit { POSIX.close(descriptor) }

    /// The daemon's counters, asked for now.
    func stats() throws(Failure) -> ServerStats {
        let id = nextRequestID
        nextRequestID += 1
        var request = ByteBuffer()
        request.writeRequest(Request(id: id, .stats))
        if let code = POSIX.writeAll(descriptor, request, POSIX.sendWithoutSignal) {
            throw Failure(description: "could not send to the daemon: \(String(cString: strerror(code)))")
        }
        while true {
            switch try next() {
            case .stats(id?, let stats): return stats
            case .error(let refusal) where refusal.requestID == id || refusal.requestID == nil:
                throw Failure(description: "notifyd refused STATS: \(refusal)")
            default: continue  // nothing else is asked on this connection
            }
        }
    }

    private func next() throws(Failure) -> ServerFrame {
        do {
            return try reader.next(from: descriptor)
        } catch {
            switch error {
            case .malformed(let reason): throw Failure(description: reason)
            case .readFailed(let code): throw Failure(description: "could not read from the daemon: \(String(cString: strerror(code)))")
            case .closed: throw Failure(description: "the daemon closed the connection")
            }
        }
    }
}
