import FuzzSupport
import NATSClient
import NIOCore
import NotifyBus
import NotifyBroker
import NotifyFleet

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A libFuzzer target for what any client of the NATS server can send a daemon: messages under the bridge's subjects
/// with headers and payloads of its choosing. Each input is a run of such messages, read off the wire by the NATS
/// decoder, made into `IMPORT` requests by the fleet service's ``ImportForwarder``, written and read back as the
/// daemon reads them from the fleet's connection and carried out, with what a user does next in between (a resume by
/// number and by time, `HISTORY`, `LATEST`, a local publish); then the state log is written, read back and restored
/// into a new broker, which is resumed again.
///
/// Every frame a reader is sent must decode with the client library's decoder (a provenance field must never make a
/// line longer than a client reads), the log must read back without a problem (a record the daemon wrote must never
/// look damaged), and nothing may trap. Input: records separated by 0xFF; in each, a byte of choices, then the header
/// lines (after `NATS/1.0`), a 0x00, and the payload.
enum ImportFuzzer {
    /// Small limits, so the fuzzer reaches them: a few topics (some are forgotten), a short history, small payloads.
    static let configuration: BrokerConfiguration = {
        var configuration = BrokerConfiguration(
            protocolLimits: ProtocolLimits(maxPayload: 2048, maxTopic: 32, maxLine: 512),
            maxSubscriptionsPerConnection: 64,
            maxTopics: 6,
            maxRetainedBytes: 16_384
        )
        configuration.maxRetainedTopicsPerUser = 4
        configuration.history = HistoryLimits(messages: 4, bytes: 4096)
        configuration.fleetUID = fleetPeer.uid
        return configuration
    }()
    static let topics = ["f.a", "f.b", "f.c", "f.d.e", "g", "user.1000.x", "h.i", "f.a.b"]
    static let fleetPeer = PeerCredentials(pid: 1, uid: 998, gid: 998)
    static let local = PeerCredentials(pid: 2, uid: 1000, gid: 1000)
    /// The state directory, made once per process and emptied before each input.
    static let directory: String = {
        var template = Array("/tmp/notifyd-import-fuzz-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { fatalError("cannot make a temporary directory") }
        return String(cString: made)
    }()

    static func run(_ input: UnsafeRawBufferPointer) {
        for name in ["state.log", "state.log.tmp"] { unlink(directory + "/" + name) }
        // Kept-aside copies of a damaged log would mean the precondition below failed; none are made otherwise.
        let clock = Clock()
        do {
            let broker = try start(clock: clock, requireIntact: true)
            let fleet = broker.open(peer: fleetPeer, transport: DecodingTransport())
            let requests = NIOSingleStepByteToMessageProcessor(RequestDecoder(limits: configuration.protocolLimits))
            let reader = broker.open(peer: local, transport: DecodingTransport())
            let publisher = broker.open(peer: local, transport: DecodingTransport())
            var forwarder = ImportForwarder(hostName: "self")
            let records = input.split(separator: 0xFF, maxSplits: 64, omittingEmptySubsequences: true)
            for record in records {
                let choices = record.first!
                let topicName = topics[Int(choices & 7)]
                let topic = try! Topic(topicName)
                if let message = message(to: topicName, UnsafeRawBufferPointer(rebasing: record.dropFirst())) {
                    if case .forward(let imported) = forwarder.request(for: message, topic: topic, replayed: choices & 0x08 != 0) {
                        var wire = ByteBuffer()
                        wire.writeRequest(Request(.importMessage(imported)))
                        try? requests.process(buffer: wire) { broker.handle($0, from: fleet) }
                    }
                }
                if choices & 0x10 != 0 {
                    handle(.subscribe(try! TopicPattern(topicName), SubscribeOptions(since: .sequence(0))), from: reader, broker)
                    handle(.subscribe(try! TopicPattern(topicName), SubscribeOptions(since: .sequence(UInt64(choices) << 56))), from: reader, broker)
                }
                if choices & 0x20 != 0 {
                    handle(.subscribe(try! TopicPattern(">"), SubscribeOptions(since: .time(PublishTime(microsecondsSinceEpoch: 0)))), from: reader, broker)
                }
                if choices & 0x40 != 0 {
                    handle(.history(topic, count: nil), from: reader, broker)
                    handle(.latest(topic), from: reader, broker)
                }
                if choices & 0x80 != 0 {
                    handle(.publish(topic, payload: ByteBuffer(string: "local"), PublishOptions(retain: true)), from: publisher, broker)
                }
                broker.flush()
            }
            try broker.saveState()
            broker.close(reader)
            broker.close(publisher)
            broker.close(fleet)
            broker.flush()
        } catch {
            preconditionFailure("the state log could not be written: \(error)")
        }
        // What a restarted daemon does: read the log back (intact), restore, and serve resumes of everything.
        do {
            let broker = try start(clock: clock, requireIntact: true)
            let reader = broker.open(peer: local, transport: DecodingTransport())
            handle(.subscribe(try! TopicPattern(">"), SubscribeOptions(since: .time(PublishTime(microsecondsSinceEpoch: 0)))), from: reader, broker)
            for name in topics {
                let topic = try! Topic(name)
                handle(.subscribe(try! TopicPattern(name), SubscribeOptions(since: .sequence(0))), from: reader, broker)
                handle(.latest(topic), from: reader, broker)
                handle(.history(topic, count: nil), from: reader, broker)
            }
            broker.flush()
            broker.close(reader)
            broker.flush()
        } catch {
            preconditionFailure("the state log could not be read back: \(error)")
        }
    }

    /// A broker on the state log in ``directory``; the log must be intact.
    static func start(clock: Clock, requireIntact: Bool) throws -> Broker {
        let (log, contents) = try StateLog.open(directory: directory)
        precondition(contents.problems.isEmpty, "the daemon's own state log read back with problems: \(contents.problems)")
        let broker = Broker(configuration: configuration, clock: clock.tick)
        broker.attach(log, restoring: contents)
        return broker
    }

    /// The NATS message `bytes` describes (header lines, a 0x00, the payload), as the bridge's connection reads it
    /// off the wire under the subject of `topic`; nil when the decoder does not take it.
    static func message(to topic: String, _ bytes: UnsafeRawBufferPointer) -> NATSMessage? {
        let cut = bytes.firstIndex(of: 0) ?? bytes.endIndex
        var headers = ByteBuffer(string: "NATS/1.0\r\n")
        headers.writeBytes(UnsafeRawBufferPointer(rebasing: bytes[..<cut]))
        headers.writeString("\r\n\r\n")
        let payload = cut < bytes.endIndex ? UnsafeRawBufferPointer(rebasing: bytes[(cut + 1)...]) : UnsafeRawBufferPointer(start: nil, count: 0)
        var wire = ByteBuffer(string: "HMSG notifyd.\(topic) 1 \(headers.readableBytes) \(headers.readableBytes + payload.count)\r\n")
        wire.writeImmutableBuffer(headers)
        wire.writeBytes(payload)
        wire.writeString("\r\n")
        guard case .message(let message)? = try? NATSServerDecoder().decode(buffer: &wire) else { return nil }
        return message
    }

    static func handle(_ command: Command, from session: Session, _ broker: Broker) {
        broker.handle(.request(Request(id: 1, command)), from: session)
    }
}

/// The broker's clock: one microsecond per reading, from a fixed start, the same for the restarted broker.
final class Clock {
    private(set) var now: UInt64 = 1_795_305_600_000_000
    func tick() -> PublishTime {
        now += 1
        return PublishTime(microsecondsSinceEpoch: now)
    }
}

/// A reader's connection: every frame it is sent goes through the client library's decoder, as `notify` and
/// `NotifyClient` read them, and must decode.
final class DecodingTransport: SessionTransport {
    private var decoder = NIOSingleStepByteToMessageProcessor(ServerFrameDecoder())
    var isWritable: Bool { true }
    var bufferedBytes: Int { 0 }

    func write(_ frame: ByteBuffer) {
        do {
            try decoder.process(buffer: frame) { _ in }
        } catch {
            preconditionFailure("a client cannot read what the daemon sent: \(error)")
        }
    }
    func flush() {}
    func close() {}
    func abort() {}
}

/// libFuzzer's entry for one input (exported under its C name too, which libFuzzer's own `main` wants linked).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    ImportFuzzer.run(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}

/// Fuzzing (built with `-D FUZZING`): libFuzzer calls `fuzzOneInput`. Otherwise replays saved inputs:
/// `notifyd-import-fuzz FILE...`.
@main
enum ImportFuzzerMain {
    static func main() {
        FuzzDriver.main(callback: { fuzzOneInput($0, $1) }, replay: ImportFuzzer.run)
    }
}
