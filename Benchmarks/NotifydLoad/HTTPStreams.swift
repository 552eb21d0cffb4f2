import ArgumentParser
import Foundation
import NIOCore
import NIOPosix
import NIOWebSocket
import NotifyBus
import Synchronization

/// notifyd-http's streams against the library's own subscriptions (issue 39): deliveries per second to 1 and 100
/// clients over SSE, a WebSocket and the client library, and the memory an idle stream costs the gateway and the
/// daemon.
struct HTTPStreams: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "http-streams",
        abstract: "notifyd-http's SSE and WebSocket deliveries per second to 1 and 100 clients, beside the library's; memory per idle stream.",
        discussion: """
            A release notifyd and notifyd-http (next to this executable) with their defaults, but for the gateway's \
            bounds on streams. Each case: N clients subscribe to one topic (SSE over a plain TCP connection, a WebSocket \
            over one with NIO's frame decoder, each counting events where they lie in what it read; or \
            NotifyClient.subscribe), then one publisher sends \
            --messages 64-byte messages without retaining, as fast as the daemon takes them, and the time runs until \
            every client has counted them all, received or announced as dropped. Deliveries per second are the \
            messages received over that time; what the daemon dropped for clients that fell behind is printed apart. \
            memory: --idle idle SSE streams, the RSS of notifyd-http and notifyd before and after, the daemon \
            connections the gateway uses for them, and the time for one message to each of their 50 topics to reach \
            them all.
            """
    )

    @Option(help: "Messages per run.") var messages = 100_000
    @Option(help: "Runs of each case (medians reported).") var runs = 3
    @Option(help: "Client counts, comma-separated.") var clients = "1,100"
    @Option(help: "Kinds, comma-separated: sse, ws, library, memory.") var cases = "sse,ws,library,memory"
    @Option(help: "Idle streams for the memory case.") var idle = 500
    @Option(help: "The notifyd-http to measure (the packaged one, say: /usr/sbin/notifyd-http); by default the one beside this executable.")
    var gatewayBinary: String?

    func run() async throws {
        let daemon = try BenchmarkDaemon()
        defer { daemon.stop() }
        let gateway = try GatewayProcess(socketPath: daemon.socketPath, binary: gatewayBinary)
        defer { gateway.stop() }
        print("idle     notifyd-http just started: \(gateway.residentKiB) KiB")
        let counts = clients.split(separator: ",").compactMap { Int($0) }
        for kind in cases.split(separator: ",").map(String.init) {
            if kind == "memory" {
                try await memory(gateway: gateway, daemon: daemon)
                continue
            }
            for count in counts {
                var rates: [Double] = []
                var dropped = 0
                for run in 0..<runs {
                    let topic = "bench.http.\(kind).\(count).\(run)"
                    let (rate, lost) = try await measure(kind, clients: count, topic: topic, gateway: gateway, daemon: daemon)
                    rates.append(rate)
                    dropped += lost
                }
                let each = rates.map { ClientThroughput.rate($0) }.joined(separator: ", ")
                print("\(kind.padding(toLength: 8, withPad: " ", startingAt: 0)) \(String(count).padding(toLength: 4, withPad: " ", startingAt: 0)) clients: median \(ClientThroughput.rate(median(rates))) deliveries/s (runs: \(each)); dropped \(dropped)")
            }
        }
    }

    /// One run: the deliveries per second to `clients` clients of `kind`, and the messages they were told were dropped.
    private func measure(_ kind: String, clients: Int, topic: String, gateway: GatewayProcess, daemon: BenchmarkDaemon) async throws -> (Double, Int) {
        let target = messages
        let counters = (0..<clients).map { _ in StreamCounter(target: target) }
        var closers: [@Sendable () async -> Void] = []
        switch kind {
        case "sse":
            for counter in counters {
                let channel = try await SSECounter.connect(port: gateway.port, path: "/\(topic)/sse", counter: counter)
                closers.append { try? await channel.close() }
            }
        case "ws":
            for counter in counters {
                let channel = try await WebSocketCounter.connect(port: gateway.port, path: "/\(topic)/ws", counter: counter)
                closers.append { try? await channel.close() }
            }
        case "library":
            for counter in counters {
                let client = try await NotifyClient.connect(to: daemon.socketPath)
                let subscription = try await client.subscribe(to: [try TopicPattern(topic)])
                counter.opened()
                let task = Task {
                    for try await event in subscription {
                        switch event {
                        case .message: counter.count(messages: 1)
                        case .dropped(let notice): counter.count(dropped: Int(notice.count))
                        }
                        if counter.isDone { break }
                    }
                }
                closers.append {
                    task.cancel()
                    await client.close()
                }
            }
        default:
            throw LoadError("unknown case \(kind)")
        }
        for counter in counters { await counter.waitOpened() }
        let publisher = try await NotifyClient.connect(to: daemon.socketPath)
        let payload = ByteBuffer(repeating: UInt8(ascii: "x"), count: 64)
        let start = ContinuousClock.now
        var sent = 0
        while sent < target {
            let batch = min(1_000, target - sent)
            try await publisher.publish(Array(repeating: payload, count: batch), to: try Topic(topic), retain: false)
            sent += batch
        }
        try await publisher.flush()
        for counter in counters { await counter.waitDone() }
        let elapsed = ContinuousClock.now - start
        await publisher.close()
        for close in closers { await close() }
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        // Deliveries are what the clients received; what the daemon dropped for them is counted apart.
        let dropped = counters.reduce(0) { $0 + $1.dropped }
        return (Double(target * clients - dropped) / seconds, dropped)
    }

    /// What an idle SSE stream costs: the RSS of the gateway and of the daemon, before and after `idle` of them.
    private func memory(gateway: GatewayProcess, daemon: BenchmarkDaemon) async throws {
        let gatewayBefore = gateway.residentKiB
        let daemonBefore = daemon.residentKiB
        var channels: [any Channel] = []
        var counters: [StreamCounter] = []
        for index in 0..<idle {
            let counter = StreamCounter(target: 1)
            counters.append(counter)
            channels.append(try await SSECounter.connect(port: gateway.port, path: "/bench.idle.\(index % 50)/sse", counter: counter))
            await counter.waitOpened()
        }
        let gatewayAfter = gateway.residentKiB
        let daemonAfter = daemon.residentKiB
        let stats = try await NotifyClient.connect(to: daemon.socketPath)
        let connections = (try await stats.stats()["connections"] ?? 1) - 1
        print("memory   \(idle) idle SSE streams: notifyd-http \(gatewayBefore) → \(gatewayAfter) KiB, \((gatewayAfter - gatewayBefore) * 1024 / idle) B per stream;"
            + " notifyd \(daemonBefore) → \(daemonAfter) KiB, \((daemonAfter - daemonBefore) * 1024 / idle) B per stream;"
            + " daemon connections the gateway uses: \(connections)")
        // One message to each of the 50 topics: the time until every stream has its one.
        let start = ContinuousClock.now
        for topic in 0..<50 { try await stats.publish("wake", to: Topic("bench.idle.\(topic)"), retain: false) }
        try await stats.flush()
        for counter in counters { await counter.waitDone() }
        let reached = ContinuousClock.now - start
        print("memory   one message reached all \(idle) idle streams in \(reached.components.seconds * 1_000 + reached.components.attoseconds / 1_000_000_000_000_000) ms")
        await stats.close()
        for channel in channels { try? await channel.close() }
    }
}

/// Counts one client's events: `open`, messages, and what was dropped; resumes whoever waits for them.
final class StreamCounter: Sendable {
    private struct State {
        var opened = false
        var messages = 0
        var dropped = 0
        var openWaiters: [CheckedContinuation<Void, Never>] = []
        var doneWaiters: [CheckedContinuation<Void, Never>] = []
        /// The start of a line the last read cut.
        var tail: [UInt8] = []
    }

    let target: Int
    private let state = Mutex(State())

    init(target: Int) {
        self.target = target
    }

    var isDone: Bool { state.withLock { $0.messages + $0.dropped >= target } }
    var dropped: Int { state.withLock { $0.dropped } }

    func opened() {
        let waiters = state.withLock { state in
            state.opened = true
            defer { state.openWaiters = [] }
            return state.openWaiters
        }
        for waiter in waiters { waiter.resume() }
    }

    func count(messages: Int = 0, dropped: Int = 0) {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.messages += messages
            state.dropped += dropped
            guard state.messages + state.dropped >= target else { return [] }
            defer { state.doneWaiters = [] }
            return state.doneWaiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Takes bytes of a stream of events a line each (JSON lines, SSE's `data:` lines), counting the events of the
    /// lines it completes; the start of a line a read cut is kept for the next. Lines are found and read where they
    /// are, with no array or string made per event: the reader must not be what limits the rate measured.
    func take(_ bytes: some Collection<UInt8>) {
        var tally = EventTally()
        state.withLock { state in
            state.tail.append(contentsOf: bytes)
            let consumed = state.tail.withUnsafeBytes { raw -> Int in
                var start = 0
                while start < raw.count, let newline = memchr(raw.baseAddress! + start, 0x0A, raw.count - start) {
                    let end = raw.baseAddress!.distance(to: UnsafeRawPointer(newline))
                    tally.take(UnsafeRawBufferPointer(rebasing: raw[start..<end]))
                    start = end + 1
                }
                return start
            }
            state.tail.removeFirst(consumed)
        }
        tally.report(to: self)
    }

    /// Takes one event's JSON (a WebSocket message, a line): a message counts one; a drop, the messages it counts.
    func takeEvent(_ event: UnsafeRawBufferPointer) {
        var tally = EventTally()
        tally.take(event)
        tally.report(to: self)
    }

    func waitOpened() async {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state in
                if state.opened { return true }
                state.openWaiters.append(continuation)
                return false
            }
            if ready { continuation.resume() }
        }
    }

    func waitDone() async {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state in
                if state.messages + state.dropped >= target { return true }
                state.doneWaiters.append(continuation)
                return false
            }
            if ready { continuation.resume() }
        }
    }
}

/// An SSE reader on a plain TCP connection: the request written by hand, the response's bytes counted as they come
/// (its headers and chunk sizes hold no event).
final class SSECounter: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    let counter: StreamCounter

    init(counter: StreamCounter) {
        self.counter = counter
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        counter.take(buffer.readableBytesView)
    }

    static func connect(port: Int, path: String, counter: StreamCounter) async throws -> any Channel {
        try await StreamReaders.connect(port: port, head: "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nAccept: text/event-stream\r\n\r\n") {
            [SSECounter(counter: counter)]
        }
    }
}

/// A release `notifyd-http` next to this executable, on a free loopback port, in front of `socketPath`: anonymous (a
/// benchmark on loopback), and as nobody when this runs as root, which the gateway refuses to be.
final class GatewayProcess: Sendable {
    let port: Int
    private let process = Process()

    init(socketPath: String, binary: String? = nil) throws {
        let binary = binary ?? URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent("notifyd-http").path
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            throw LoadError("\(binary) is not built; run `swift build -c release --product notifyd-http` first")
        }
        let output = Pipe()
        let arguments = ["--socket", socketPath, "--listen", "127.0.0.1:0", "--allow-anonymous", "--max-streams", "20000", "--max-streams-per-address", "20000",
            "--max-connections", "20000", "--max-connections-per-address", "20000",
        ]
        if getuid() == 0 {
            // nobody reaches the daemon's socket (0666 under root) through its directory.
            chmod((socketPath as NSString).deletingLastPathComponent, 0o755)
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            process.arguments = ["--reuid=65534", "--regid=65534", "--clear-groups", binary] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: binary)
            process.arguments = arguments
        }
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        var text = ""
        while !text.contains("\n") {
            let data = output.fileHandleForReading.availableData
            guard !data.isEmpty else { throw LoadError("notifyd-http ended before it listened") }
            text += String(decoding: data, as: UTF8.self)
        }
        guard let range = text.range(of: "http://127.0.0.1:"), let port = Int(text[range.upperBound...].prefix { $0.isNumber }) else {
            throw LoadError("notifyd-http said: \(text)")
        }
        self.port = port
    }

    var residentKiB: Int {
        let status = (try? String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") }
        return line.flatMap { $0.split(separator: " ").dropFirst().first.flatMap { Int($0) } } ?? 0
    }

    func stop() {
        process.terminate()
        process.waitUntilExit()
    }
}
