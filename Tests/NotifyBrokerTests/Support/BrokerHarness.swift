import NIOCore
import Testing

@testable import NotifyBus
@testable import NotifyBroker
@testable import NotifyProtocol

/// A transport that keeps what the broker wrote, as the buffers it was handed (so tests can tell a shared buffer).
final class RecordingTransport: SessionTransport {
    var written: [ByteBuffer] = []
    var flushes = 0
    var closed = false
    /// Bytes written but not yet taken by `frames()`.
    private var unread = ByteBuffer()
    private var decoder = NIOSingleStepByteToMessageProcessor(ServerFrameDecoder())

    /// Set by tests to play a subscriber that stops reading. Its session takes note of each change, as the daemon's
    /// handler has the broker do; what a connection that takes frames again sets off (its queue drained, its held
    /// requests carried out) waits until the test calls ``Broker/writabilityChanged(_:)``, playing the socket.
    var isWritable = true {
        didSet { session?.noteTransportWritability() }
    }
    /// The session it is the transport of.
    weak var session: Session?
    var aborted = false

    /// Set by tests to play a socket that fills up: after this many more writes it stops taking frames.
    var writesUntilFull: Int?
    /// Set by tests to play a peer that reads nothing: what is written stays in the write buffer, which stops
    /// taking frames at this many bytes, as NIO's does at its high-water mark.
    var writeBufferLimit: Int?
    private(set) var bufferedBytes = 0

    func write(_ frame: ByteBuffer) {
        written.append(frame)
        unread.writeImmutableBuffer(frame)
        if let writeBufferLimit {
            bufferedBytes += frame.readableBytes
            if bufferedBytes >= writeBufferLimit { isWritable = false }
        }
        if let left = writesUntilFull {
            writesUntilFull = left - 1
            if left <= 1 { isWritable = false }
        }
    }
    /// Called on every flush, before it is counted: lets a test look at the world as the replies leave.
    var onFlush: (() -> Void)?
    func flush() {
        onFlush?()
        flushes += 1
    }
    func close() { closed = true }
    /// Called on abort: the daemon's channel closes at once, and its handler closes the session and flushes.
    var onAbort: (() -> Void)?
    func abort() {
        aborted = true
        onAbort?()
    }

    /// Plays the peer reading everything in the write buffer.
    func takeBuffered() {
        bufferedBytes = 0
        isWritable = true
    }

    /// The frames written since the last call.
    func frames() throws -> [ServerFrame] {
        var frames: [ServerFrame] = []
        try decoder.process(buffer: unread) { frames.append($0) }
        unread.clear()
        return frames
    }
}

/// A broker with a clock that ticks one microsecond per publish, and helpers to speak the protocol to it.
final class BrokerHarness {
    var now: UInt64 = 1_795_305_600_000_000
    private(set) var broker: Broker!

    init(configuration: BrokerConfiguration = .default) {
        broker = Broker(configuration: configuration) { [unowned self] in
            now += 1
            return PublishTime(microsecondsSinceEpoch: now)
        }
    }

    final class Client {
        let session: Session
        let transport: RecordingTransport
        let harness: BrokerHarness
        private var decoder: NIOSingleStepByteToMessageProcessor<RequestDecoder>

        init(harness: BrokerHarness, session: Session, transport: RecordingTransport, limits: ProtocolLimits) {
            self.harness = harness
            self.session = session
            self.transport = transport
            self.decoder = NIOSingleStepByteToMessageProcessor(RequestDecoder(limits: limits))
        }

        /// Sends protocol text as one read batch: decode, handle each frame, flush.
        func send(_ text: String) {
            try! decoder.process(buffer: ByteBuffer(string: text)) { harness.broker.handle($0, from: session) }
            harness.broker.flush()
        }

        /// Carries out protocol text without ending the batch: what another client then sends is in the same batch.
        func handle(_ text: String) {
            try! decoder.process(buffer: ByteBuffer(string: text)) { harness.broker.handle($0, from: session) }
        }

        /// Frames received since the last call, without the greeting.
        func received() throws -> [ServerFrame] {
            try transport.frames().filter { if case .hello = $0 { false } else { true } }
        }

        /// The payloads of the deliveries received since the last call, as text.
        func deliveries() throws -> [String] {
            try received().compactMap { if case .delivery(let d) = $0 { d.text } else { nil } }
        }
    }

    func connect(uid: UInt32 = 1000, pid: Int32 = 4242, groups: [UInt32] = [], unit: String? = nil) -> Client {
        let transport = RecordingTransport()
        let session = broker.open(peer: PeerCredentials(pid: pid, uid: uid, gid: uid, groups: groups, unit: unit), transport: transport)
        transport.session = session
        broker.flush()
        return Client(harness: self, session: session, transport: transport, limits: broker.configuration.protocolLimits)
    }
}

func delivery(_ frame: ServerFrame) -> Delivery? {
    if case .delivery(let delivery) = frame { return delivery }
    return nil
}

func errorCode(_ frame: ServerFrame) -> ErrorCode? {
    if case .error(let error) = frame { return error.code }
    return nil
}

extension ServerFrame {
    /// The request id a reply echoes; nil for frames that answer no request (and replies to requests without one).
    var requestID: UInt64? {
        switch self {
        case .ok(let id, _), .pong(let id), .latest(let id, _), .topics(let id, _), .stats(let id, _), .explanation(let id, _):
            return id
        case .error(let error):
            return error.requestID
        case .missed(let id, _):
            return id
        case .hello, .delivery, .dropped, .export:
            return nil
        }
    }
}
