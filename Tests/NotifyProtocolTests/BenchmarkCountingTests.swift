import NIOCore
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

@testable import NotifyBench
@testable import NotifyProtocol
import TestSupport

/// `notify bench`'s accounting on bytes alone: the frame scanner, the tally of deliveries, drops and replies, the
/// pre-encoded publish batches and the `/proc` readings.
@Suite("Benchmark counting (frame scanner, no socket)", .timeLimit(.minutes(3)))
struct BenchmarkCountingTests {
    /// A `MSG` frame as the daemon writes it, carrying message `sequence` of `publisher`.
    static func delivery(_ sequence: UInt64, publisher: Int = 0, topic: String = "bench.0", size: Int = 16) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeDelivery(
            Delivery(
                topic: try! Topic(topic),
                sequence: sequence + 1,
                time: PublishTime(microsecondsSinceEpoch: 1_795_305_600_000_000 + sequence),
                publisher: Publisher(uid: 1000, pid: 4242, unit: "bench.service"),
                payload: ByteBuffer(
                    bytes: BenchmarkPayload.make(
                        size: size,
                        numbering: BenchmarkPayload.numbering(publisher: publisher, sequence: sequence),
                        stamp: 123
                    )
                )
            )
        )
        return buffer
    }

    static func drop(count: UInt64, first: UInt64, last: UInt64, topic: String = "bench.0") -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeDropNotice(DropNotice(topic: try! Topic(topic), count: count, firstSequence: first, lastSequence: last))
        return buffer
    }

    static func deliveries(_ sequences: some Sequence<UInt64>, publisher: Int = 0) -> ByteBuffer {
        var buffer = ByteBuffer()
        for sequence in sequences {
            var frame = delivery(sequence, publisher: publisher)
            buffer.writeBuffer(&frame)
        }
        return buffer
    }

    /// Scans `wire` whole, as one read.
    static func tally(_ wire: ByteBuffer, publishers: Int = 1, expected: UInt64) throws -> DeliveryTally {
        var tally = DeliveryTally(publishers: publishers, expected: expected)
        var buffer = wire
        try FrameScanner.scan(&buffer, into: &tally, at: 7)
        #expect(buffer.readableBytes == 0, "every frame is complete")
        return tally
    }

    @Test("counts every MSG of the real encoder, wherever the reads split the bytes")
    func splitAnywhere() throws {
        var wire = ByteBuffer()
        for sequence in 0..<50 as Range<UInt64> {
            var frame = Self.delivery(sequence, size: sequence % 3 == 0 ? 1024 : 16)
            wire.writeBuffer(&frame)
        }
        var random = SeededRandom(seed: SeededRandom.seed(default: 23))
        for round in 0..<40 {
            var tally = DeliveryTally(publishers: 1, expected: 50)
            var inbound = ByteBuffer()
            for var chunk in ProtocolSamples.chunks(of: wire, &random) {
                inbound.writeBuffer(&chunk)
                try FrameScanner.scan(&inbound, into: &tally, at: UInt64(round))
                inbound.discardReadBytes()
            }
            #expect(inbound.readableBytes == 0)
            #expect(tally.delivered == 50 && tally.outOfOrder == 0 && tally.lost == 0, "round \(round)")
            #expect(tally.isComplete && tally.completedAt == UInt64(round))
            #expect(tally.hasReceived(49, from: 0) && !tally.hasReceived(50, from: 0))
        }
    }

    @Test("an incomplete frame is left for the next read; nothing before it is counted twice")
    func incompleteFrame() throws {
        var wire = Self.deliveries(0..<2)
        let whole = wire.readableBytes
        var third = Self.delivery(2)
        wire.writeBuffer(&third)
        for cut in whole..<wire.readableBytes {
            var tally = DeliveryTally(publishers: 1, expected: 3)
            var bytes = wire.getSlice(at: 0, length: cut)!
            try FrameScanner.scan(&bytes, into: &tally, at: 0)
            #expect(tally.delivered == 2 && bytes.readableBytes == cut - whole, "cut at \(cut)")
        }
    }

    @Test("lost: expected less delivered; a gap no DROP announced is out of order")
    func lostAndUnannouncedGap() throws {
        let tail = try Self.tally(Self.deliveries(0..<7), expected: 10)
        #expect(tail.delivered == 7 && tail.lost == 3 && tail.outOfOrder == 0 && !tail.isComplete && tail.completedAt == nil)

        let gap = try Self.tally(Self.deliveries(Array(0..<5) + Array(10..<20)), expected: 20)
        #expect(gap.delivered == 15 && gap.lost == 5 && gap.dropped == 0)
        #expect(gap.outOfOrder == 1, "the delivery after the unannounced gap")
    }

    @Test("out of order: a repeat or a reordering counts, each delivery not the next of its publisher")
    func outOfOrder() throws {
        // 0 1 3 2 4: 3 skips 2 (unannounced), 2 goes back, 4 skips 3 again: three deliveries out of order.
        let reordered = try Self.tally(Self.deliveries([0, 1, 3, 2, 4]), expected: 5)
        #expect(reordered.delivered == 5 && reordered.lost == 0 && reordered.outOfOrder == 3)

        let repeated = try Self.tally(Self.deliveries([0, 1, 1, 2]), expected: 3)
        #expect(repeated.delivered == 4 && repeated.lost == 0 && repeated.outOfOrder == 1)

        var short = Self.delivery(0, size: 15)
        var wire = Self.delivery(0)
        wire.writeBuffer(&short)
        let unnumbered = try Self.tally(wire, expected: 2)
        #expect(unnumbered.delivered == 2 && unnumbered.outOfOrder == 1, "a payload too short for the header is not of this run")
    }

    @Test("publishers are checked apart: interleaved, each in its own order")
    func publishersApart() throws {
        var wire = ByteBuffer()
        for sequence in 0..<100 as Range<UInt64> {
            for publisher in 0..<3 where (sequence + UInt64(publisher)) % 2 == 0 || publisher == 2 {
                var frame = Self.delivery(sequence, publisher: publisher)
                wire.writeBuffer(&frame)
            }
        }
        // Publishers 0 and 1 skip every other message without a DROP: each skip is out of order.
        let tally = try Self.tally(wire, publishers: 3, expected: 300)
        #expect(tally.delivered == 200 && tally.lost == 100)
        #expect(tally.outOfOrder == 49 + 50, "publisher 0 from 2 on, publisher 1 from its first (1)")
        #expect(try Self.tally(Self.deliveries(0..<3, publisher: 7), publishers: 3, expected: 3).outOfOrder == 3, "an unknown publisher")
    }

    @Test("DROP: its count is lost and dropped, its gap is not out of order, and it completes the subscriber")
    func dropAccounting() throws {
        var wire = Self.deliveries(0..<5)
        var notice = Self.drop(count: 5, first: 6, last: 10)
        wire.writeBuffer(&notice)
        var rest = Self.deliveries(10..<20)
        wire.writeBuffer(&rest)
        let tally = try Self.tally(wire, expected: 20)
        #expect(tally.delivered == 15 && tally.dropped == 5 && tally.dropNotices == 1)
        #expect(tally.lost == 5 && tally.outOfOrder == 0)
        #expect(tally.isComplete && tally.accountedFor == 20)

        // Drops at the end leave no gap, and still complete the subscriber: nothing more will come.
        var end = Self.deliveries(0..<18)
        var last = Self.drop(count: 2, first: 19, last: 20)
        end.writeBuffer(&last)
        let ended = try Self.tally(end, expected: 20)
        #expect(ended.isComplete && ended.lost == 2 && ended.dropped == 2 && ended.outOfOrder == 0)

        // A gap larger than what was announced is out of order.
        var short = Self.deliveries(0..<5)
        var small = Self.drop(count: 2, first: 6, last: 7)
        short.writeBuffer(&small)
        var after = Self.deliveries(10..<12)
        short.writeBuffer(&after)
        #expect(try Self.tally(short, expected: 12).outOfOrder == 1)
    }

    @Test("replies: OK and PONG are counted, ERR kept with its code and sentence; other lines skipped")
    func replies() throws {
        var wire = ByteBuffer()
        wire.writeGreeting(ServerGreeting(limits: .default))
        wire.writeOK(requestID: nil)
        wire.writeOK(requestID: 9, value: 3)
        wire.writePong(requestID: nil)
        wire.writeError(ProtocolError(.limitReached, "too many subscriptions on this connection", requestID: 4))
        wire.writeError(ProtocolError(.malformed, "second"))
        wire.writeStaticString("\nSOMETHING new=1\n")
        var frame = Self.delivery(0)
        wire.writeBuffer(&frame)
        let tally = try Self.tally(wire, expected: 1)
        #expect(tally.confirmations == 2 && tally.pongs == 1 && tally.errors == 2 && tally.delivered == 1)
        #expect(tally.firstError == ProtocolError(.limitReached, "too many subscriptions on this connection", requestID: 4))
    }

    @Test("bytes that are not frames are an error, not a miscount")
    func malformed() {
        let samples = [
            "MSG bench.0 1 2 3 4 - 16\n0123456789abcdefX\n",  // no line break after the payload
            "MSG bench.0 1 2 3 4 - x\n",  // no size
            "DROP bench.0 many 1 2\n",
            "#x OK\n",
            String(repeating: "a", count: FrameScanner.maxLine + 1),
        ]
        for sample in samples {
            var tally = DeliveryTally(publishers: 1, expected: 1)
            var buffer = ByteBuffer(string: sample)
            #expect(throws: ServerFrameDecoder.Malformed.self, "\(sample.prefix(40))") {
                try FrameScanner.scan(&buffer, into: &tally, at: 0)
            }
        }
    }

    @Test("a publish batch holds PUB frames for the topics in turn, numbered as prepared, and decodes as requests")
    func publishBatch() throws {
        let topics = try (0..<3).map { try Topic("bench.\($0)") }
        // Frames of 45 bytes ("PUB bench.0 20 noretain\n", the payload, a line break): two rounds fit in 300.
        var batch = PublishBatch(topics: topics, payloadSize: 20, retain: false, targetBytes: 300)
        #expect(batch.framesPerBatch == 6)
        batch.prepare(publisher: 2, firstSequence: UInt64(batch.framesPerBatch), count: 4, stamp: 99)
        // A socket that takes 7 bytes at a time, and is full every other time.
        var wire = ByteBuffer()
        var full = false
        while batch.hasPending {
            let done = batch.write { bytes in
                full.toggle()
                if full { return .wouldBlock }
                wire.writeBytes(UnsafeRawBufferPointer(rebasing: bytes.prefix(7)))
                return .wrote(min(7, bytes.count))
            }
            #expect(done == !batch.hasPending)
        }
        let (decoded, _) = try decodeAll(RequestDecoder(), chunks: [wire])
        #expect(decoded.count == 4)
        for (slot, request) in decoded.enumerated() {
            guard case .request(let request) = request, case .publish(let topic, let payload, let options) = request.command else {
                Issue.record("not a publish: \(request)")
                continue
            }
            #expect(topic == topics[slot % 3] && !options.retain && !options.acknowledge && payload.readableBytes == 20)
            let numbering = payload.withUnsafeReadableBytes { BenchmarkPayload.readNumbering($0.baseAddress!) }
            #expect(BenchmarkPayload.split(numbering) == (2, UInt64(batch.framesPerBatch + slot)))
            #expect(payload.getInteger(at: payload.readerIndex + 8, endianness: .little, as: UInt64.self) == 99)
            #expect(payload.getBytes(at: payload.readerIndex + 16, length: 4) == Array("xxxx".utf8))
        }
    }

    @Test("/proc: CPU ticks from stat (a name with spaces and parentheses), VmRSS from status")
    func procReadings() {
        let stat = "4242 (notify d (x)) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 75 0 0 20 0 3 0 12345 1000000 2500"
        #expect(ProcessUsage.cpuTicks(stat: Array(stat.utf8)) == 325)
        #expect(ProcessUsage.cpuTicks(stat: Array("4242 (x) S 1".utf8)) == nil)
        let status = "Name:\tnotifyd\nVmPeak:\t  300000 kB\nVmRSS:\t   27424 kB\nThreads:\t3\n"
        #expect(ProcessUsage.residentKiB(status: Array(status.utf8)) == 27_424)
        #expect(ProcessUsage.residentKiB(status: Array("Name:\tx\n".utf8)) == nil)
        let own = ProcessUsage.read(pid: getpid())
        #expect(own != nil && own!.residentKiB > 0, "this process's own /proc entries")
    }
}
