import Foundation
import HummingbirdWSClient
import Logging
import NIOWebSocket
import Testing

/// The page at `/` in a real browser: headless Chromium (Debian's), driven over its DevTools protocol (issue 39).
@Suite("HTTP gateway: the page in headless Chromium", .timeLimit(.minutes(3)))
struct GatewayPageBrowserTests {
    /// A JavaScript expression whose promise resolves with `value` once `condition` holds, looking again at every
    /// change of the page: the browser waits for the event, not the test.
    static func once(_ condition: String, _ value: String) -> String {
        """
        new Promise(resolve => {
          const check = () => { if (\(condition)) { observer.disconnect(); resolve(\(value)); return true; } return false; };
          const observer = new MutationObserver(check);
          observer.observe(document.documentElement, {subtree: true, childList: true, characterData: true, attributes: true});
          check();
        })
        """
    }

    @Test("Chromium loads /, the list is there, and a notify send appears in the page (read from the DOM, waited for as an event); a screenshot is taken")
    func pageInChromium() async throws {
        let daemon = try await TestDaemon.start()
        #expect(try await daemon.notify(["send", "page.before", "written on the server"]).status == 0)
        let gateway = try await TestGateway.start(for: daemon)
        let profile = daemon.directory.path + "/chromium"
        let browser = try ChildProcess("/usr/bin/chromium", [
            "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--window-size=1100,500",
            "--remote-debugging-port=0", "--remote-allow-origins=*", "--user-data-dir=\(profile)", "about:blank",
        ])
        defer { browser.signal(SIGKILL) }
        try await browser.standardError.wait("Chromium's DevTools") { $0.contains("DevTools listening on ws://127.0.0.1:") }
        let text = browser.standardError.text
        let after = text.range(of: "ws://127.0.0.1:")!.upperBound
        let devtools = try #require(Int(text[after...].prefix { $0.isNumber }))
        let target = try await gateway.curl(["-X", "PUT", "http://127.0.0.1:\(devtools)/json/new?about:blank"])
        let page = try #require(TestGateway.objects([target.output.replacingOccurrences(of: "\n", with: "")]).first?["webSocketDebuggerUrl"] as? String)

        let screenshot = Shared<Data?>(nil)
        let timings = Shared<(sentAt: ContinuousClock.Instant, seenAt: ContinuousClock.Instant)?>(nil)
        let listed = Shared<String?>(nil)
        _ = try await withDeadline(.seconds(60), waitingFor: "the page in Chromium") {
            try await WebSocketClient.connect(url: page, configuration: .init(maxFrameSize: 1 << 24), logger: Logger(label: "cdp")) { inbound, outbound, _ in
                var messages = inbound.messages(maxSize: 1 << 26).makeAsyncIterator()
                var nextID = 0
                func call(_ method: String, _ params: [String: Any]) async throws -> [String: Any] {
                    nextID += 1
                    let request = try JSONSerialization.data(withJSONObject: ["id": nextID, "method": method, "params": params])
                    try await outbound.write(.text(String(decoding: request, as: UTF8.self)))
                    while let object = try await next() {
                        if object["id"] as? Int == nextID { return object["result"] as? [String: Any] ?? [:] }
                    }
                    throw TestFailure("DevTools closed during \(method)")
                }
                // The next message from DevTools; events are noted as they pass.
                var events: Set<String> = []
                func next() async throws -> [String: Any]? {
                    while let message = try await messages.next() {
                        guard case .text(let text) = message, let object = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else { continue }
                        if let event = object["method"] as? String { events.insert(event) }
                        return object
                    }
                    return nil
                }
                func evaluate(_ expression: String) async throws -> Any? {
                    let result = try await call("Runtime.evaluate", ["expression": expression, "awaitPromise": true, "returnByValue": true])
                    return (result["result"] as? [String: Any])?["value"]
                }
                // Loaded (its scripts run in the page's document, not the blank one before it), then the list as the
                // server wrote it, and the live stream open.
                _ = try await call("Page.enable", [:])
                _ = try await call("Page.navigate", ["url": gateway.url("/?auth=\(gateway.auth)")])
                while !events.contains("Page.loadEventFired"), try await next() != nil {}
                _ = try await evaluate(Self.once("document.getElementById('status').textContent === 'live'", "true"))
                let before = try await evaluate("document.querySelector('tr[data-topic=\"page.before\"] td.value')?.textContent ?? ''") as? String
                listed.withLock { $0 = before }
                let sent = try await daemon.notify(["send", "page.live", "hello, browser"])
                let sentAt = ContinuousClock.now
                #expect(sent.status == 0)
                _ = try await evaluate(Self.once("document.querySelector('tr[data-topic=\"page.live\"] td.value')?.textContent === 'hello, browser'", "true"))
                timings.withLock { $0 = (sentAt, ContinuousClock.now) }
                let shot = try await call("Page.captureScreenshot", ["format": "png"])
                screenshot.withLock { $0 = (shot["data"] as? String).flatMap { Data(base64Encoded: $0) } }
                try await outbound.close(.normalClosure, reason: nil)
            }
        }
        #expect(listed.withLock { $0 } == "written on the server")
        // The message appeared (the page's own wait, within the deadline above): how long it took is the
        // suite's load as much as the page's, so it is not a pass mark here.
        #expect(timings.withLock { $0 } != nil)
        let png = try #require(screenshot.withLock { $0 })
        #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47]) && png.count > 5_000)
        // script/page-screenshot keeps it in docs/.
        if let path = ProcessInfo.processInfo.environment["NOTIFYD_PAGE_SCREENSHOT"] { try png.write(to: URL(fileURLWithPath: path)) }
        try await gateway.stop()
        try await daemon.stop()
    }
}
