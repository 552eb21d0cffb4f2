#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import NotifyBus

/// The throughput phase, the C harness's `throughput` mode: each publisher connection writes its share of the
/// messages as pre-encoded frames, a batch of about 64 KiB per `write`, while every subscriber connection counts
/// what it receives; all in one thread around one `poll` loop.
///
/// Publishers stay at most the window ahead of the slowest subscriber. The phase ends when every subscriber has
/// every message (or was told, by `DROP`, that some were dropped), when nothing arrives for the quiet period after
/// the last byte is written, or at the time limit; what did not arrive then is lost.
struct ThroughputPhase {
    let configuration: BenchmarkConfiguration
    let path: String
    let daemon: DaemonProcess

    /// One publisher connection and how far it has got.
    private struct Publisher {
        let connection: BenchConnection
        var batch: PublishBatch
        /// Messages it publishes in all.
        let quota: UInt64
        /// Messages put into batches so far, and those whose bytes are written whole.
        var prepared: UInt64 = 0
        var sent: UInt64 = 0
        /// Whether the socket was full at the last write.
        var isBlocked = false
        var isDone: Bool { sent == quota }
    }

    func run() throws -> BenchmarkResult.Throughput {
        let total = UInt64(configuration.messageCount)
        let topics = configuration.topics
        let subscribers = try BenchConnection.openSubscribers(
            count: configuration.subscribers,
            path: configuration.subscriberSocketPath.map { SocketPath.resolveForClient(explicit: $0) } ?? path,
            topics: topics,
            tally: DeliveryTally(publishers: configuration.publishers, expected: total)
        )
        var publishers: [Publisher] = []
        for index in 0..<configuration.publishers {
            let share = total / UInt64(configuration.publishers) + (UInt64(index) < total % UInt64(configuration.publishers) ? 1 : 0)
            publishers.append(
                Publisher(
                    connection: try BenchConnection(path: path, tally: DeliveryTally(publishers: 1, expected: 0)),
                    batch: PublishBatch(
                        topics: topics,
                        payloadSize: configuration.payloadSize,
                        retain: configuration.retain,
                        targetBytes: configuration.batchBytes
                    ),
                    quota: share
                )
            )
        }
        var pollSet = subscribers.map { pollfd(fd: $0.descriptor, events: Int16(POLLIN), revents: 0) }
        pollSet += publishers.map { pollfd(fd: $0.connection.descriptor, events: Int16(POLLIN), revents: 0) }

        let window = UInt64(configuration.effectiveWindow)
        let quiet = BenchmarkClock.nanoseconds(configuration.quietPeriod)
        var preparedTotal: UInt64 = 0
        var publishedTotal: UInt64 = 0
        var publishersDone = publishers.filter(\.isDone).count
        var finished = [Bool](repeating: false, count: subscribers.count)
        var finishedCount = 0
        var disconnected = 0
        var ending = BenchmarkResult.Throughput.Ending.complete

        let daemonCPUBefore = daemon.usage()?.cpuSeconds
        let benchCPUBefore = BenchmarkClock.ownCPUSeconds()
        let start = BenchmarkClock.now()
        var publishEnd: UInt64 = publishersDone == publishers.count ? start : 0
        var lastProgress = start
        let deadline = start &+ BenchmarkClock.nanoseconds(configuration.timeLimit)

        while finishedCount + disconnected < subscribers.count {
            // Publishers: up to four batches each per turn, while the socket takes them and the window allows.
            var keepsWriting = false
            for index in publishers.indices where !publishers[index].isDone {
                for _ in 0..<4 {
                    if !publishers[index].batch.hasPending {
                        guard publishers[index].prepared < publishers[index].quota else { break }
                        if window > 0 {
                            let slowest = slowest(subscribers)
                            if preparedTotal > slowest && preparedTotal - slowest >= window { break }
                        }
                        let first = publishers[index].prepared
                        let count = min(UInt64(publishers[index].batch.framesPerBatch), publishers[index].quota - first)
                        publishers[index].batch.prepare(
                            publisher: index,
                            firstSequence: first,
                            count: Int(count),
                            stamp: BenchmarkClock.now()
                        )
                        publishers[index].prepared += count
                        preparedTotal += count
                    }
                    guard try publishers[index].batch.write(with: publishers[index].connection.write) else {
                        publishers[index].isBlocked = true
                        break
                    }
                    publishers[index].isBlocked = false
                    publishedTotal += publishers[index].prepared - publishers[index].sent
                    publishers[index].sent = publishers[index].prepared
                    if publishers[index].isDone {
                        publishersDone += 1
                        if publishersDone == publishers.count { publishEnd = BenchmarkClock.now() }
                        break
                    }
                    keepsWriting = true
                }
                // Ask for writability only while the socket is full.
                pollSet[subscribers.count + index].events = Int16(publishers[index].isBlocked ? POLLIN | POLLOUT : POLLIN)
            }

            if poll(&pollSet, nfds_t(pollSet.count), keepsWriting ? 0 : 50) > 0 {
                for index in subscribers.indices where pollSet[index].revents != 0 {
                    let subscriber = subscribers[index]
                    let before = subscriber.tally.accountedFor
                    if try !subscriber.drain(reads: 8) {
                        pollSet[index].fd = -1  // poll ignores it from now on
                        if !finished[index] { disconnected += 1 }
                    }
                    if subscriber.tally.accountedFor != before { lastProgress = BenchmarkClock.now() }
                    if !finished[index] && subscriber.tally.isComplete {
                        finished[index] = true
                        finishedCount += 1
                    }
                }
                for index in publishers.indices where pollSet[subscribers.count + index].revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 {
                    // Only errors come back to a publisher; a refused publish is counted, and it is never delivered.
                    if try !publishers[index].connection.drain(reads: 8) {
                        throw NotifyClientError(.connectionClosed, "the daemon closed a publisher's connection (did it stop?)")
                    }
                }
            }

            let now = BenchmarkClock.now()
            if now > deadline {
                ending = .timeLimit
                break
            }
            if publishersDone == publishers.count && now - lastProgress > quiet {
                ending = .quiet
                break
            }
        }
        if finishedCount < subscribers.count && ending == .complete { ending = .disconnected }
        let daemonCPUAfter = daemon.usage()?.cpuSeconds
        let benchCPU = BenchmarkClock.ownCPUSeconds() - benchCPUBefore
        if publishEnd == 0 { publishEnd = BenchmarkClock.now() }

        // The end: the last subscriber's last message, or the last delivery when some never came.
        let tallies = subscribers.map(\.tally)
        let end: UInt64
        if finishedCount == subscribers.count {
            end = tallies.compactMap(\.completedAt).max() ?? lastProgress
        } else {
            end = tallies.compactMap(\.lastDeliveryAt).max() ?? lastProgress
        }
        let delivered = tallies.reduce(0) { $0 + $1.delivered }
        let publishSeconds = BenchmarkClock.seconds(nanoseconds: publishEnd - start)
        let elapsedSeconds = BenchmarkClock.seconds(nanoseconds: max(end, start) - start)
        let publisherTallies = publishers.map(\.connection.tally)
        return BenchmarkResult.Throughput(
            messages: publishedTotal,
            expectedDeliveries: total * UInt64(subscribers.count),
            delivered: delivered,
            lost: tallies.reduce(0) { $0 + $1.lost },
            dropped: tallies.reduce(0) { $0 + $1.dropped },
            dropNotices: tallies.reduce(0) { $0 + $1.dropNotices },
            outOfOrder: tallies.reduce(0) { $0 + $1.outOfOrder },
            publishErrors: publisherTallies.reduce(0) { $0 + $1.errors },
            firstPublishError: publisherTallies.lazy.compactMap(\.firstError).first,
            disconnectedSubscribers: disconnected,
            ending: ending,
            publishSeconds: publishSeconds,
            elapsedSeconds: elapsedSeconds,
            publishedPerSecond: publishSeconds > 0 ? Double(publishedTotal) / publishSeconds : 0,
            deliveredPerSecond: elapsedSeconds > 0 ? Double(delivered) / elapsedSeconds : 0,
            daemonCPUSeconds: daemonCPUBefore.flatMap { before in daemonCPUAfter.map { $0 - before } },
            benchCPUSeconds: benchCPU
        )
    }

    /// How far the slowest subscriber still connected has got: delivered plus announced as dropped.
    private func slowest(_ subscribers: [BenchConnection]) -> UInt64 {
        var slowest = UInt64.max
        for subscriber in subscribers where !subscriber.isClosed {
            slowest = min(slowest, subscriber.tally.accountedFor)
        }
        return slowest == .max ? 0 : slowest
    }
}
