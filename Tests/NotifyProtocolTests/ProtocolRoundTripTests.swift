import Foundation
import NIOCore
import Testing

@testable import NotifyProtocol
import TestSupport

@Suite("Protocol round trips", .timeLimit(.minutes(3)))
struct ProtocolRoundTripTests {
    @Test("random requests survive encoding and decoding, split at random points")
    func requests() throws {
        var random = SeededRandom(seed: SeededRandom.seed(default: 7))
        for round in 0..<60 {
            let requests = (0..<Int.random(in: 1...60, using: &random)).map { _ in ProtocolSamples.request(&random) }
            var wire = ByteBuffer()
            for request in requests { wire.writeRequest(request) }
            let chunks = ProtocolSamples.chunks(of: wire, &random)
            let (decoded, _) = try decodeAll(RequestDecoder(), chunks: chunks)
            #expect(decoded == requests.map { .request($0) }, "round \(round)")
        }
    }

    @Test("a message frame's numbers are written in decimal as String(_:) writes them, at every length")
    func decimalNumbers() {
        var random = SeededRandom(seed: SeededRandom.seed(default: 13))
        var values: [UInt64] = [0, 1, 9, 10, 11, 99, 100, 101, 999, 1_000, 1_795_305_604_567_890, UInt64.max, UInt64.max / 10]
        for digits in 1...19 { values += [UInt64(pow(10, Double(digits))) - 1, UInt64(pow(10, Double(digits - 1)))] }
        values += (0..<200).map { _ in UInt64.random(in: 0...UInt64.max, using: &random) >> UInt64.random(in: 0...63, using: &random) }
        for value in values {
            var frame = ByteBuffer()
            frame.writeMessageFrame(
                .delivery,
                requestID: nil,
                topic: "t",
                sequence: value,
                time: PublishTime(microsecondsSinceEpoch: value),
                publisher: Publisher(uid: UInt32(truncatingIfNeeded: value), pid: 2),
                payload: ByteBuffer(string: "x")
            )
            let line = "MSG t \(value) \(value) \(UInt32(truncatingIfNeeded: value)) 2 - 1\nx\n"
            #expect(String(buffer: frame) == line)
        }
    }

    @Test("the line start the encoder reports is the one MessageLineStart measures and writes, at every number length")
    func lineStartReported() {
        var random = SeededRandom(seed: SeededRandom.seed(default: 17))
        for _ in 0..<200 {
            let sequence = UInt64.random(in: 0...UInt64.max, using: &random) >> UInt64.random(in: 0...63, using: &random)
            let time = UInt64.random(in: 0...UInt64.max, using: &random) >> UInt64.random(in: 0...63, using: &random)
            let topic = String(repeating: "t", count: Int.random(in: 1...40, using: &random))
            var frame = ByteBuffer()
            var lineStart = -1
            let written = frame.writeMessageFrame(
                .delivery,
                requestID: nil,
                topic: topic,
                sequence: sequence,
                time: PublishTime(microsecondsSinceEpoch: time),
                uid: 7,
                pid: 8,
                unitField: "-",
                payload: UnsafeRawBufferPointer(start: nil, count: 0),
                lineStart: &lineStart
            )
            #expect(written == frame.readableBytes)
            #expect(lineStart == MessageLineStart.length(topicLength: topic.utf8.count, sequence: sequence, time: time))
            let measured = frame.withUnsafeReadableBytes { bytes in
                var name = topic
                return name.withUTF8 { MessageLineStart.length(in: bytes, topic: UnsafeRawBufferPointer($0), sequence: sequence, time: time) }
            }
            #expect(lineStart == measured)
        }
    }

    @Test("random server frames survive encoding and decoding, split at random points")
    func serverFrames() throws {
        var random = SeededRandom(seed: SeededRandom.seed(default: 11))
        for round in 0..<60 {
            let frames = (0..<Int.random(in: 1...60, using: &random)).map { _ in ProtocolSamples.serverFrame(&random) }
            var wire = ByteBuffer()
            for frame in frames { wire.writeServerFrame(frame) }
            let chunks = ProtocolSamples.chunks(of: wire, &random)
            let (decoded, _) = try decodeAll(ServerFrameDecoder(), chunks: chunks)
            #expect(decoded == frames, "round \(round)")
        }
    }

    @Test("a request split at every single byte decodes the same")
    func byteByByte() throws {
        var random = SeededRandom(seed: 3)
        let requests = (0..<40).map { _ in ProtocolSamples.request(&random) }
        var wire = ByteBuffer()
        for request in requests { wire.writeRequest(request) }
        var chunks: [ByteBuffer] = []
        while let byte = wire.readSlice(length: 1) { chunks.append(byte) }
        #expect(try decodeAll(RequestDecoder(), chunks: chunks).outputs == requests.map { .request($0) })
    }

    @Test("publishes to one long topic reuse its checked name; another name, or a bad one, is read anew")
    func repeatedTopic() throws {
        let long = "sensors.kitchen.temperature"
        let wire = ByteBuffer(string: "PUB \(long) 1\na\nPUB \(long) 1\nb\nPUB sensors.kitchen.temperaturf 1\nc\nPUB sensors.kitchen..emperature 1\nd\nPUB \(long) 1\ne\n")
        let decoded = try decodeAll(RequestDecoder(), chunks: [wire]).outputs
        let topics: [String] = decoded.map {
            switch $0 {
            case .request(let request): if case .publish(let topic, _, _) = request.command { return topic.name }
            case .failure(let error): return "ERR \(error.code)"
            }
            return "?"
        }
        #expect(topics == [long, long, "sensors.kitchen.temperaturf", "ERR invalid-topic", long])
    }

    @Test("a PUB decoded in place names its payload's bytes in the buffer, however the bytes arrived, and the frames after it")
    func publishInPlace() throws {
        let wire = "#7 PUB a.b 5 noretain ack\nhello\nPING\nPUB c 0\n\n"
        for split in 1..<wire.utf8.count {
            var decoder = RequestDecoder()
            var buffer = ByteBuffer(string: String(wire.prefix(split)))
            var seen: [String] = []
            func drain() {
                while let frame = decoder.decodeInPlace(buffer: &buffer) {
                    switch frame {
                    case .publish(let publish):
                        let payload = buffer.withVeryUnsafeBytes { String(decoding: $0[publish.payload], as: UTF8.self) }
                        seen.append("\(publish.id.map(String.init) ?? "-") \(publish.topic.name) \(payload) \(publish.options.retain) \(publish.options.acknowledge)")
                        #expect(publish.request(in: buffer) == Request(id: publish.id, .publish(publish.topic, payload: ByteBuffer(string: payload), publish.options)))
                    case .other(let decoded):
                        seen.append("\(decoded)")
                    }
                }
            }
            drain()
            buffer.writeString(String(wire.dropFirst(split)))
            drain()
            #expect(seen == ["7 a.b hello false true", "\(DecodedRequest.request(Request(.ping)))", "- c  true false"], "split at \(split)")
        }
    }

    @Test("a client's batch of fire-and-forget publishes is byte for byte the PUB frames of the general encoder")
    func publishBatchMatchesRequests() throws {
        let topic = try Topic("batch.topic")
        // Sizes around each change in the number of digits, and an empty payload.
        let payloads = [0, 1, 9, 10, 99, 100, 999, 1_000, 12_345].map { ByteBuffer(repeating: UInt8(ascii: "p"), count: $0) }
        for retain in [true, false] {
            var batch = ByteBuffer()
            let written = batch.writePublishes(payloads, to: topic, retain: retain)
            var expected = ByteBuffer()
            for payload in payloads {
                expected.writeRequest(Request(.publish(topic, payload: payload, PublishOptions(retain: retain, acknowledge: false))))
            }
            #expect(batch == expected, "retain: \(retain)")
            #expect(written == expected.readableBytes)
        }
    }

    @Test("the wire form matches PROTOCOL.md")
    func wireForm() {
        var buffer = ByteBuffer()
        let publisher = Publisher(uid: 1000, pid: 4242)
        buffer.writeRequest(Request(id: 7, .publish(try! Topic("demo.bye"), payload: ByteBuffer(string: "bye"), PublishOptions())))
        buffer.writeRequest(Request(.publish(try! Topic("demo.x"), payload: ByteBuffer(string: "hi"), PublishOptions(retain: false, acknowledge: true))))
        buffer.writeRequest(Request(.subscribe(try! TopicPattern("demo.>"), SubscribeOptions(latestFirst: true))))
        buffer.writeGreeting(ServerGreeting(limits: .default))
        buffer.writeMessageFrame(
            .delivery,
            requestID: 9,
            topic: "demo.hello",
            sequence: 1,
            time: PublishTime(microsecondsSinceEpoch: 1_795_305_600_123_456),
            publisher: publisher,
            payload: ByteBuffer(string: "world")
        )
        buffer.writeMessageFrame(
            .delivery,
            requestID: nil,
            topic: "demo.far",
            sequence: 2,
            time: PublishTime(microsecondsSinceEpoch: 1_795_305_600_123_457),
            publisher: Publisher(uid: 0, pid: 77, unit: "backup.service", host: "web-01"),
            payload: ByteBuffer(string: "x")
        )
        buffer.writeOK(requestID: 8, value: 1)
        buffer.writeError(ProtocolError(.notFound, "nothing\nbuffered", requestID: 3))
        #expect(
            String(buffer: buffer) == """
                #7 PUB demo.bye 3
                bye
                PUB demo.x 2 noretain ack
                hi
                SUB demo.> latest
                HELLO notifyd 5 max_payload=1048576 max_topic=255 max_line=1024
                MSG demo.hello 1 1795305600123456 1000 4242 - 5
                world
                MSG demo.far 2 1795305600123457 0 77 web-01/backup.service 1
                x
                #8 OK 1
                #3 ERR not-found nothing buffered

                """
        )
    }

    @Test("the decoder takes a message's topic and unit as the last message's only when they are the same bytes; an invalid topic after a valid one is still refused")
    func lastNames() throws {
        var decoder = ServerFrameDecoder()
        var input = ByteBuffer(string: "MSG a.b 1 5 1000 1 job.service 1\nx\nMSG a.b 2 5 1000 1 job.service 1\ny\n"
            + "MSG a.c 3 5 1000 1 job.servicf 1\nz\nMSG a.c 4 5 1000 1 - 1\nw\n")
        var names: [String] = []
        while case .delivery(let delivery)? = try decoder.decode(buffer: &input) {
            names.append("\(delivery.topic.name) \(delivery.publisher.unit ?? "-") \(delivery.text ?? "")")
        }
        #expect(names == ["a.b job.service x", "a.b job.service y", "a.c job.servicf z", "a.c - w"])
        var bad = ByteBuffer(string: "MSG a.c* 5 5 1000 1 - 1\nv\n")
        #expect(throws: ServerFrameDecoder.Malformed.self) { try decoder.decode(buffer: &bad) }
    }

    @Test("decimal writing", arguments: [0, 9, 10, 99, 1_000_000, UInt64.max])
    func decimal(_ value: UInt64) {
        var buffer = ByteBuffer()
        #expect(buffer.writeDecimal(value) == String(value).utf8.count)
        #expect(String(buffer: buffer) == String(value))
    }

    @Test("publish times print as RFC 3339 in UTC", arguments: [
        (UInt64(0), "1970-01-01T00:00:00.000000Z"),
        (951_782_400_000_001, "2000-02-29T00:00:00.000001Z"),
        (1_795_305_600_123_456, "2026-11-22T00:00:00.123456Z"),
        (1_234_567_890_999_999, "2009-02-13T23:31:30.999999Z"),
        (4_102_444_799_000_000, "2099-12-31T23:59:59.000000Z"),
        (253_402_300_800_000_000, "10000-01-01T00:00:00.000000Z"),
        (UInt64.max, "586524-01-19T08:01:49.551615Z"),
    ])
    func rfc3339(_ micros: UInt64, _ expected: String) {
        #expect(PublishTime(microsecondsSinceEpoch: micros).rfc3339 == expected)
    }
}
