import ArgumentParser
import NIOCore
import NotifyBus
import NotifySystem

struct Send: AsyncParsableCommand, ConnectingCommand {
    static let configuration = CommandConfiguration(
        abstract: "Publish a message to a topic.",
        discussion: """
            The message is MESSAGE, else everything read from standard input, byte for byte. With --lines, each \
            line of standard input (without its line break) is a message of its own, all sent over one connection \
            as the lines arrive, so `tail -f log | notify send log.lines --lines` works.

            A MESSAGE that starts with - goes after --: notify send temperature.outside -- -5.

            notify send exits 0 only once the daemon has accepted the message(s).
            """
    )

    @ParentCommand var parent: Notify
    @OptionGroup var connection: ConnectionOptions

    @Argument(help: "The topic to publish to, such as backup.status.")
    var topic: String

    @Argument(help: "The message. Without it, standard input is read.")
    var message: String?

    @Flag(name: .long, help: "Deliver without replacing the topic's buffered latest message.")
    var noRetain = false

    @Flag(name: .long, help: "Send each line of standard input as its own message.")
    var lines = false

    func validate() throws {
        if lines && message != nil {
            throw ValidationError("give either MESSAGE or --lines, not both: --lines reads the messages from standard input")
        }
    }

    func run() async throws {
        try await runReportingFailures {
            guard lines else {
                return try Send.publishOnce(socket: socketPath, topic: topic, message: message, retain: !noRetain)
            }
            let topic = try parseTopic(topic)
            let client = try await connect()
            try await sendLines(to: topic, with: client)
            await client.close()
        }
    }

    /// Publishes one message over a blocking connection and waits for the daemon to accept it: the whole of a
    /// plain `notify send`, shared by the argument parser's path and the quick one (`QuickSend`).
    static func publishOnce(socket: String?, topic: String, message: String?, retain: Bool) throws {
        let topic = try parseTopic(topic)
        let connection = try NotifyConnection(to: socket)
        let payload: [UInt8]
        if let message {
            payload = Array(message.utf8)
        } else {
            if StandardInput.isTerminal {
                StandardError.writeLine("notify: reading the message from standard input; end it with Ctrl-D")
            }
            let limit = connection.greeting.limits.maxPayload
            payload = StandardInput.readAll(limit: limit)
            guard payload.count <= limit else {
                connection.close()
                throw CommandFailure(
                    .invalidInput,
                    "standard input holds more than \(limit) bytes, the most the daemon accepts in a message (max_payload); send less, or split it with --lines"
                )
            }
        }
        try connection.publishAcknowledged(ByteBuffer(bytes: payload), to: topic, retain: retain)
        connection.close()
    }

    /// Publishes each line without waiting for its acknowledgement, the lines of each read of standard input in one
    /// write; then one round trip confirms them all: the daemon handles one connection's requests in order.
    private func sendLines(to topic: Topic, with client: NotifyClient) async throws {
        let limit = client.greeting.limits.maxPayload
        var pending: [UInt8] = []
        var lineNumber = 0
        var batch: [ByteBuffer] = []
        func add(_ line: ArraySlice<UInt8>) async throws {
            lineNumber += 1
            if line.count > limit {
                // The lines before it go out, as they would have one by one.
                try await client.publish(batch, to: topic, retain: !noRetain)
                throw CommandFailure(.invalidInput, "line \(lineNumber) is \(line.count) bytes; the daemon accepts at most \(limit) (max_payload)")
            }
            batch.append(ByteBuffer(bytes: line))
        }
        while true {
            let chunk = StandardInput.read()
            if chunk.isEmpty { break }
            pending += chunk
            var start = pending.startIndex
            while let newline = pending[start...].firstIndex(of: UInt8(ascii: "\n")) {
                try await add(pending[start..<newline])
                start = newline + 1
            }
            pending.removeSubrange(..<start)
            // What was read goes out before the next read: a line is published as soon as it arrives.
            try await client.publish(batch, to: topic, retain: !noRetain)
            batch.removeAll(keepingCapacity: true)
        }
        if !pending.isEmpty {
            try await add(pending[...])
            try await client.publish(batch, to: topic, retain: !noRetain)
        }
        do {
            try await client.flush()
        } catch let error as NotifyClientError where error.kind == .refused {
            // Each line is a publish of its own: say that the ones not refused went through.
            let failure = CommandFailure(error)
            throw CommandFailure(failure.status, "\(error.message) (\(lineNumber) lines were sent; those not refused were accepted)")
        }
    }
}
