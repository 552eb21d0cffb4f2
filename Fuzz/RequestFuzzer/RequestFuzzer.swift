import FuzzSupport
import NIOCore
import NotifyBus
import NotifyBroker

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A libFuzzer target for what a client can send: the bytes go through the `RequestDecoder`, in two reads split
/// where the input says, and every decoded frame is carried out by a `Broker`, as the daemon would.
///
/// Built by `script/fuzz` with `-sanitize=fuzzer,address` and `-D FUZZING`; libFuzzer then provides `main`. Built
/// plainly (as `swift build` does), it is a replayer: `notifyd-request-fuzz FILE...` runs each file through the same
/// code, to reproduce a crash that the fuzzer saved.
///
/// A crash, a hang, or one of the preconditions below failing is a bug: the daemon runs this code on whatever any
/// local process sends.
enum RequestFuzzer {
    /// Small limits, so the fuzzer reaches them.
    static let limits = ProtocolLimits(maxPayload: 4096, maxTopic: 64, maxLine: 256)
    static let configuration = BrokerConfiguration(
        protocolLimits: limits,
        maxSubscriptionsPerConnection: 32,
        maxTopics: 64,
        maxQueuedMessages: 16,
        maxQueuedBytes: 8192,
        maxConnections: 4,
        maxConnectionsPerUser: 4,
        maxRetainedBytes: 16_384
    )

    static func run(_ input: UnsafeRawBufferPointer) {
        guard let first = input.first else { return }
        let bytes = UnsafeRawBufferPointer(rebasing: input.dropFirst())
        let split = bytes.isEmpty ? 0 : Int(first) % (bytes.count + 1)
        // The first byte also picks whether the connection takes its replies (a stalled one holds requests back),
        // whether another subscriber takes its deliveries, and that one's overflow policy: with `disconnect` it is
        // closed in the middle of the fuzzed connection's publishes, as the daemon's channel closes on an abort.
        let transport = CountingTransport(isWritable: first & 0x80 == 0)
        let subscriberTransport = CountingTransport(isWritable: first & 0x40 == 0)
        let overflow: OverflowPolicy = first & 0x20 == 0 ? .dropOldest : .disconnect

        let broker = Broker(configuration: configuration)
        let subscriber = broker.open(peer: PeerCredentials(pid: 1, uid: 1, gid: 1), transport: subscriberTransport)
        broker.handle(.request(Request(id: nil, .subscribe(try! TopicPattern(">"), SubscribeOptions(overflow: overflow)))), from: subscriber)
        let session = broker.open(peer: PeerCredentials(pid: 2, uid: 2, gid: 2), transport: transport)
        subscriberTransport.onAbort = { [unowned broker, unowned subscriber] in
            broker.close(subscriber)
            broker.flush()
        }
        transport.onAbort = { [unowned broker, unowned session] in
            broker.close(session)
            broker.flush()
        }

        let processor = NIOSingleStepByteToMessageProcessor(RequestDecoder(limits: limits))
        for chunk in [bytes[..<split], bytes[split...]] {
            var buffer = ByteBuffer()
            buffer.writeBytes(UnsafeRawBufferPointer(rebasing: chunk))
            do {
                try processor.process(buffer: buffer) { broker.handle($0, from: session) }
            } catch {
                preconditionFailure("the request decoder threw \(error); it reports bad input as frames, never by throwing")
            }
            broker.flush()
            // What the decoder keeps between reads is at most one frame: a line, or a line and its payload.
            precondition(processor.unprocessedBytes <= limits.maxLine + limits.maxPayload + 2, "decoder holds \(processor.unprocessedBytes) bytes")
        }
        try? processor.finishProcessing(seenEOF: true) { broker.handle($0, from: session) }
        transport.isWritable = true
        broker.writabilityChanged(session)
        broker.close(session)
        broker.flush()

        let statistics = broker.statistics
        precondition(statistics.connections <= 1, "connections: \(statistics.connections)")
        precondition(statistics.retainedBytes <= UInt64(configuration.maxRetainedBytes), "retained bytes \(statistics.retainedBytes)")
        precondition(statistics.topics <= configuration.maxTopics, "topics \(statistics.topics)")
        broker.close(subscriber)
        broker.flush()
        precondition(broker.statistics.subscriptions == 0, "subscriptions left: \(broker.statistics.subscriptions)")
        precondition(broker.statistics.queuedBytes == 0, "queued bytes left: \(broker.statistics.queuedBytes)")
    }
}

/// A connection that takes frames (or not) and counts them; its peer reads nothing, so they all stay in its write
/// buffer and count against the uid's queued bytes until it closes.
final class CountingTransport: SessionTransport {
    var isWritable: Bool
    private(set) var bytes = 0
    var bufferedBytes: Int { bytes }
    /// What the daemon's channel does on an abort: it closes at once, and its handler closes the session.
    var onAbort: (() -> Void)?

    init(isWritable: Bool) { self.isWritable = isWritable }

    func write(_ frame: ByteBuffer) {
        precondition(isWritable, "the broker wrote to a connection that takes nothing")
        bytes += frame.readableBytes
    }
    func flush() {}
    func close() {}
    func abort() { onAbort?() }
}

/// libFuzzer's entry for one input (exported under its C name too, which libFuzzer's own `main` wants linked).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    RequestFuzzer.run(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}

/// Fuzzing (built with `-D FUZZING`): libFuzzer calls `fuzzOneInput`. Otherwise replays saved inputs:
/// `notifyd-request-fuzz FILE...`.
@main
enum RequestFuzzerMain {
    static func main() {
        FuzzDriver.main(callback: { fuzzOneInput($0, $1) }, replay: RequestFuzzer.run)
    }
}
