import Foundation
import NIOCore
import NotifyBus
import NotifyBroker

/// What a publish costs the broker, one subscriber, 16-byte payloads, without sockets: with and without history,
/// with and without the state log. The figures the README's "What history costs" breaks down. Then 1 KiB payloads
/// on the daemon's path, in batches as a read of 64 KiB brings them, each of which a history keeps whole.
func brokerBenchmarks(_ harness: inout Harness) {
    print("\n== Broker: publish → one subscriber, 16 B, retained ==")
    let count = 20_000
    let topic = try! Topic("sensors.kitchen.temperature")
    let wire = publishes(count, to: topic, size: 16)
    var requests: [DecodedRequest] = []
    var decoder = RequestDecoder()
    var input = wire
    while let request = decoder.decode(buffer: &input) { requests.append(request) }
    // Batches of 256, as the daemon reads a busy publisher.
    let batchWire = wire.getSlice(at: 0, length: 256 * (wire.readableBytes / count))!

    for (label, history) in [("history off", HistoryLimits.off), ("history 64", HistoryLimits.resumable)] {
        for (logged, inPlace) in [(false, false), (true, false), (true, true)] {
            let (broker, publisher, directory) = subscribedBroker(history: history, logged: logged, topic: topic)
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let name = "\(label), \(logged ? "state log" : "no state log")\(inPlace ? ", decoded in place (the daemon's path)" : "")"
            harness.measure(name, operations: count) {
                if inPlace { return publishInPlace(batchWire, batches: count / 256, to: broker, from: publisher) }
                var index = 0
                while index < requests.count {
                    for request in requests[index..<min(index + 256, requests.count)] { broker.handle(request, from: publisher) }
                    broker.flush()
                    index += 256
                }
            }
        }
    }

    print("\n== Broker: publish → one subscriber, 1 KiB, retained, state log, the daemon's path, 60 per batch ==")
    let largeWire = publishes(60, to: topic, size: 1024)
    for (label, history) in [("history off", HistoryLimits.off), ("history 64", HistoryLimits.resumable)] {
        let (broker, publisher, directory) = subscribedBroker(history: history, logged: true, topic: topic)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        harness.measure("1 KiB, \(label)", operations: 60 * 200) {
            publishInPlace(largeWire, batches: 200, to: broker, from: publisher)
        }
    }
}

/// `count` retained publishes of `size` bytes to `topic`, as a client sends them.
private func publishes(_ count: Int, to topic: Topic, size: Int) -> ByteBuffer {
    var wire = ByteBuffer()
    let payload = ByteBuffer(repeating: 0x61, count: size)
    for _ in 0..<count { wire.writeRequest(Request(.publish(topic, payload: payload, PublishOptions()))) }
    return wire
}

/// A broker with a subscriber to `topic` and a publisher, on a state log in a new directory if `logged`.
private func subscribedBroker(history: HistoryLimits, logged: Bool, topic: Topic) -> (Broker, Session, directory: String) {
    var configuration = BrokerConfiguration.default
    configuration.history = history
    let broker = Broker(configuration: configuration)
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bench-\(UUID().uuidString)").path
    if logged {
        let (log, contents) = try! StateLog.open(directory: directory)
        broker.attach(log, restoring: contents)
    }
    let subscriber = broker.open(peer: PeerCredentials(pid: 2, uid: 1000, gid: 1000, groups: []), transport: DiscardingTransport())
    let publisher = broker.open(peer: PeerCredentials(pid: 3, uid: 1000, gid: 1000, groups: []), transport: DiscardingTransport())
    var subscribe = ByteBuffer(string: "SUB \(topic.name)\n")
    var subscribeDecoder = RequestDecoder()
    while let request = subscribeDecoder.decode(buffer: &subscribe) { broker.handle(request, from: subscriber) }
    broker.flush()
    return (broker, publisher, directory)
}

/// The daemon's path: each batch decoded in place from what a read brought (`batch`), its publishes carried out from
/// that buffer without a request made, then the batch flushed.
private func publishInPlace(_ batch: ByteBuffer, batches: Int, to broker: Broker, from publisher: Session) {
    var decoder = RequestDecoder()
    for _ in 0..<batches {
        var buffer = batch
        while let frame = decoder.decodeInPlace(buffer: &buffer) {
            switch frame {
            case .publish(let publish): broker.handlePublish(publish, in: buffer, from: publisher)
            case .other(let request): broker.handle(request, from: publisher)
            }
        }
        broker.flush()
    }
}


/// What a history record costs the state log: sealing and appending an 80-byte frame, committed every 256.
func stateLogBenchmarks(_ harness: inout Harness) {
    print("\n== State log ==")
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bench-\(UUID().uuidString)").path
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let (log, _) = try! StateLog.open(directory: directory)
    let frame = [UInt8](repeating: 0x61, count: 80)
    let count = 20_000
    harness.measure("history record, 80 B frame, committed every 256", operations: count) {
        frame.withUnsafeBytes { bytes in
            for index in 0..<count {
                log.appendHistory(bytes)
                if index % 256 == 255 { try! log.commit() }
            }
        }
        try! log.commit()
    }
}
