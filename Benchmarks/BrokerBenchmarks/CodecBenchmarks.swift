import NIOCore
import NotifyBus

/// The per-message cost of the wire codec: reading publishes, writing deliveries.
func codecBenchmarks(_ harness: inout Harness) {
    print("\n== Codec ==")
    for size in [16, 1024] {
        var wire = ByteBuffer()
        let count = 10_000
        let payload = ByteBuffer(repeating: 0x61, count: size)
        let topic = try! Topic("sensors.kitchen.temperature")
        for _ in 0..<count { wire.writeRequest(Request(.publish(topic, payload: payload, PublishOptions()))) }
        harness.measure("decode PUB, \(size) B payload", operations: count) {
            var decoder = RequestDecoder()
            var input = wire
            var decoded = 0
            while let frame = decoder.decode(buffer: &input) {
                if case .request = frame { decoded += 1 }
            }
            blackHole(decoded)
        }
        harness.measure("encode MSG, \(size) B payload", operations: count) {
            var output = ByteBuffer()
            output.reserveCapacity(count * (size + 80))
            let publisher = Publisher(uid: 1000, pid: 4242)
            for sequence in 1...UInt64(count) {
                output.writeMessageFrame(
                    .delivery,
                    requestID: nil,
                    topic: topic.name,
                    sequence: sequence,
                    time: PublishTime(microsecondsSinceEpoch: 1_795_305_600_000_000 + sequence),
                    publisher: publisher,
                    payload: payload
                )
            }
            blackHole(output.readableBytes)
        }
    }
}
