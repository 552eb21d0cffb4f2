import Foundation
import NIOConcurrencyHelpers

/// A real `nats-server` (installed by `script/bootstrap --for-tests`), JetStream on, on a loopback port it picks,
/// with its store in a temporary directory; stopped by ``stop()`` or when let go of.
final class NATSServerProcess: Sendable {
    let port: Int
    private let process: Process
    private let store: String

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// Starts the server and waits (at most `timeout`) until it says where it listens.
    static func start(timeout: Duration = .seconds(30)) async throws -> NATSServerProcess {
        let candidates = ["/usr/sbin/nats-server", "/usr/bin/nats-server", "/usr/local/bin/nats-server"]
        guard let binary = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw Failure(description: "nats-server is not installed: run script/bootstrap --for-tests")
        }
        let store = FileManager.default.temporaryDirectory.appendingPathComponent("nats-\(UUID().uuidString)").path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["-a", "127.0.0.1", "-p", "-1", "-js", "-sd", store]
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        let (lines, sink) = AsyncStream.makeStream(of: String.self)
        let pending = NIOLockedValueBox("")
        errors.fileHandleForReading.readabilityHandler = { handle in
            let data = handle.availableData
            if data.isEmpty {
                sink.finish()
                handle.readabilityHandler = nil
                return
            }
            pending.withLockedValue { text in
                text += String(decoding: data, as: UTF8.self)
                while let newline = text.firstIndex(of: "\n") {
                    sink.yield(String(text[..<newline]))
                    text = String(text[text.index(after: newline)...])
                }
            }
        }
        try process.run()
        let marker = "Listening for client connections on 127.0.0.1:"
        let port = try await withThrowingTaskGroup(of: Int?.self) { group in
            group.addTask {
                for await line in lines {
                    if let range = line.range(of: marker), let port = Int(line[range.upperBound...].prefix { $0.isNumber }) {
                        return port
                    }
                }
                return nil
            }
            group.addTask {
                try await Task.sleep(for: timeout)  // a deadline, not a synchronisation: the line above is the event
                return nil
            }
            let port = try await group.next()!
            group.cancelAll()
            return port
        }
        guard let port else {
            process.terminate()
            throw Failure(description: "nats-server did not say where it listens within \(timeout)")
        }
        return NATSServerProcess(port: port, process: process, store: store)
    }

    private init(port: Int, process: Process, store: String) {
        self.port = port
        self.process = process
        self.store = store
    }

    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
        try? FileManager.default.removeItem(atPath: store)
    }

    deinit {
        stop()
    }
}
