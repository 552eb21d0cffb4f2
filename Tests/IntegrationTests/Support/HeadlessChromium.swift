import Foundation
import HummingbirdWSClient
import Logging
import NIOWebSocket
import Testing

/// Headless Chromium (Debian's) for one test, driven over its DevTools protocol: a page to navigate and evaluate
/// scripts in, as a user's browser would run them.
final class HeadlessChromium: Sendable {
    let process: ChildProcess
    let devtoolsPort: Int

    /// Starts Chromium with its profile in `profile` and `arguments` besides the usual headless ones.
    static func start(profile: String, arguments: [String] = []) async throws -> HeadlessChromium {
        let process = try ChildProcess("/usr/bin/chromium", [
            "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--window-size=1100,500",
            "--remote-debugging-port=0", "--remote-allow-origins=*", "--user-data-dir=\(profile)",
        ] + arguments + ["about:blank"])
        try await process.standardError.wait("Chromium's DevTools") { $0.contains("DevTools listening on ws://127.0.0.1:") }
        let text = process.standardError.text
        let after = text.range(of: "ws://127.0.0.1:")!.upperBound
        guard let port = Int(text[after...].prefix { $0.isNumber }) else { throw TestFailure("no DevTools port in: \(text)") }
        return HeadlessChromium(process: process, devtoolsPort: port)
    }

    private init(process: ChildProcess, devtoolsPort: Int) {
        self.process = process
        self.devtoolsPort = devtoolsPort
    }

    /// Opens a new page and runs `body` with it, within `deadline`.
    func withPage(deadline: Duration = .seconds(60), _ body: @escaping @Sendable (DevToolsPage) async throws -> Void) async throws {
        let target = try await TestGateway.curl(["-X", "PUT", "http://127.0.0.1:\(devtoolsPort)/json/new?about:blank"])
        let objects = TestGateway.objects([target.output.replacingOccurrences(of: "\n", with: "")])
        guard let url = objects.first?["webSocketDebuggerUrl"] as? String else { throw TestFailure("no page from DevTools: \(target.output)") }
        _ = try await withDeadline(deadline, waitingFor: "the page in Chromium") {
            try await WebSocketClient.connect(url: url, configuration: .init(maxFrameSize: 1 << 24), logger: Logger(label: "cdp")) { inbound, outbound, _ in
                let page = DevToolsPage(messages: inbound.messages(maxSize: 1 << 26).makeAsyncIterator(), outbound: outbound)
                try await body(page)
                try await outbound.close(.normalClosure, reason: nil)
            }
        }
    }

    func stop() {
        process.signal(SIGKILL)
    }
}

/// One page of ``HeadlessChromium``, over its DevTools connection. Used by one task at a time.
final class DevToolsPage {
    private var messages: WebSocketInboundMessageStream.AsyncIterator
    private let outbound: WebSocketOutboundWriter
    private var nextID = 0
    /// The events DevTools sent so far, by method.
    private(set) var events: Set<String> = []

    init(messages: WebSocketInboundMessageStream.AsyncIterator, outbound: WebSocketOutboundWriter) {
        self.messages = messages
        self.outbound = outbound
    }

    /// Calls `method` and returns its result; events that pass meanwhile are noted.
    @discardableResult
    func call(_ method: String, _ params: [String: Any] = [:]) async throws -> [String: Any] {
        nextID += 1
        let request = try JSONSerialization.data(withJSONObject: ["id": nextID, "method": method, "params": params])
        try await outbound.write(.text(String(decoding: request, as: UTF8.self)))
        while let object = try await next() {
            if object["id"] as? Int == nextID { return object["result"] as? [String: Any] ?? [:] }
        }
        throw TestFailure("DevTools closed during \(method)")
    }

    /// The next message from DevTools.
    func next() async throws -> [String: Any]? {
        while let message = try await messages.next() {
            guard case .text(let text) = message, let object = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else { continue }
            if let event = object["method"] as? String { events.insert(event) }
            return object
        }
        return nil
    }

    /// Navigates to `url` and waits until it loaded.
    func navigate(_ url: String) async throws {
        try await call("Page.enable")
        events.remove("Page.loadEventFired")
        try await call("Page.navigate", ["url": url])
        while !events.contains("Page.loadEventFired"), try await next() != nil {}
    }

    /// The value of `expression` in the page (a promise's, once it settles).
    func evaluate(_ expression: String) async throws -> Any? {
        let result = try await call("Runtime.evaluate", ["expression": expression, "awaitPromise": true, "returnByValue": true])
        return (result["result"] as? [String: Any])?["value"]
    }
}
