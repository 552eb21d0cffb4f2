import Histogram

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import NotifyBus

/// The latency phase, the C harness's `latency` mode: one message at a time over one publisher connection —
/// stamp it, publish it, wait until every subscriber has it, repeat — each time from the stamp to the moment the
/// last subscriber's read returned, recorded in an HdrHistogram after the warm-up messages. Publisher and
/// subscribers live in one process, so one clock measures both ends.
struct LatencyPhase {
    let configuration: BenchmarkConfiguration
    let path: String
    let daemon: DaemonProcess

    /// The slowest latency the histogram tells apart from the rest: an hour, in nanoseconds.
    private static let highestTrackable: UInt64 = 3_600_000_000_000

    func run() throws -> BenchmarkResult.Latency {
        let total = configuration.warmupCount + configuration.latencyCount
        let topics = configuration.topics
        let subscribers = try BenchConnection.openSubscribers(
            count: configuration.subscribers,
            path: configuration.subscriberSocketPath.map { SocketPath.resolveForClient(explicit: $0) } ?? path,
            topics: topics,
            tally: DeliveryTally(publishers: 1, expected: UInt64(total))
        )
        let publisher = try BenchConnection(path: path, tally: DeliveryTally(publishers: 1, expected: 0))
        var frames = PublishBatch(topics: topics, payloadSize: configuration.payloadSize, retain: configuration.retain, targetBytes: 0)
        // Only the subscribers still waiting for the message are polled: a wake-up costs the benchmark less the
        // more subscribers already have it (poll's cost grows with its set).
        var waiting: [Int] = []
        waiting.reserveCapacity(subscribers.count)
        var pollSet: [pollfd] = []
        pollSet.reserveCapacity(subscribers.count + 1)
        var histogram = Histogram<UInt64>(highestTrackableValue: LatencyPhase.highestTrackable, numberOfSignificantValueDigits: .three)
        let timeout = BenchmarkClock.nanoseconds(configuration.latencyTimeout)

        let daemonCPUBefore = daemon.usage()?.cpuSeconds
        let benchCPUBefore = BenchmarkClock.ownCPUSeconds()
        let start = BenchmarkClock.now()
        for index in 0..<total {
            let sequence = UInt64(index)
            let stamp = BenchmarkClock.now()
            let deadline = stamp + timeout
            try frames.sendOne(publisher: 0, sequence: sequence, stamp: stamp, to: publisher, deadline: deadline)
            waiting.removeAll(keepingCapacity: true)
            waiting.append(contentsOf: subscribers.indices)
            var lastArrival: UInt64 = 0
            while true {
                var kept = 0
                for position in waiting.indices {
                    let tally = subscribers[waiting[position]].tally
                    if tally.hasReceived(sequence, from: 0) {
                        lastArrival = max(lastArrival, tally.lastDeliveryAt ?? 0)
                    } else {
                        waiting[kept] = waiting[position]
                        kept += 1
                    }
                }
                waiting.removeLast(waiting.count - kept)
                if waiting.isEmpty { break }
                let now = BenchmarkClock.now()
                guard now < deadline else {
                    throw BenchmarkError(
                        "latency: message \(index + 1) reached \(subscribers.count - waiting.count) of \(subscribers.count) subscribers "
                            + "within \(timeout / 1_000_000_000) s; the daemon lost it or stalled"
                    )
                }
                pollSet.removeAll(keepingCapacity: true)
                for slot in waiting { pollSet.append(pollfd(fd: subscribers[slot].descriptor, events: Int16(POLLIN), revents: 0)) }
                pollSet.append(pollfd(fd: publisher.descriptor, events: Int16(POLLIN), revents: 0))
                _ = poll(&pollSet, nfds_t(pollSet.count), Int32(min((deadline - now) / 1_000_000 + 1, 100)))
                for (position, slot) in waiting.enumerated() where pollSet[position].revents != 0 {
                    guard try subscribers[slot].drain(reads: 8) else {
                        throw BenchmarkError(
                            "latency: the daemon closed a subscriber's connection after \(subscribers[slot].tally.delivered) messages"
                        )
                    }
                }
                if pollSet[waiting.count].revents != 0 {
                    guard try publisher.drain(reads: 8) else {
                        throw NotifyClientError(.connectionClosed, "the daemon closed the publisher's connection (did it stop?)")
                    }
                    if let refusal = publisher.tally.firstError { throw NotifyClientError.refused(refusal) }
                }
            }
            if index >= configuration.warmupCount { histogram.record(lastArrival - stamp) }
        }
        let elapsed = BenchmarkClock.now() - start
        let daemonCPUAfter = daemon.usage()?.cpuSeconds
        let microseconds = { (nanoseconds: UInt64) in Double(nanoseconds) / 1000 }
        return BenchmarkResult.Latency(
            messages: configuration.latencyCount,
            warmup: configuration.warmupCount,
            p50: microseconds(histogram.valueAtPercentile(50)),
            p99: microseconds(histogram.valueAtPercentile(99)),
            p999: microseconds(histogram.valueAtPercentile(99.9)),
            min: microseconds(histogram.min),
            max: microseconds(histogram.maxRecorded),
            mean: histogram.mean / 1000,
            outOfOrder: subscribers.reduce(0) { $0 + $1.tally.outOfOrder },
            elapsedSeconds: BenchmarkClock.seconds(nanoseconds: elapsed),
            daemonCPUSeconds: daemonCPUBefore.flatMap { before in daemonCPUAfter.map { $0 - before } },
            benchCPUSeconds: BenchmarkClock.ownCPUSeconds() - benchCPUBefore
        )
    }
}
