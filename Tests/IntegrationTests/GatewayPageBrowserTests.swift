import Foundation
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
        let browser = try await HeadlessChromium.start(profile: daemon.directory.path + "/chromium")
        defer { browser.stop() }
        let screenshot = Shared<Data?>(nil)
        let seen = Shared<Bool>(false)
        let listed = Shared<String?>(nil)
        try await browser.withPage { page in
            // Loaded (its scripts run in the page's document, not the blank one before it), then the list as the
            // server wrote it, and the live stream open.
            try await page.navigate(gateway.url("/?auth=\(gateway.auth)"))
            _ = try await page.evaluate(Self.once("document.getElementById('status').textContent === 'live'", "true"))
            let before = try await page.evaluate("document.querySelector('tr[data-topic=\"page.before\"] td.value')?.textContent ?? ''") as? String
            listed.withLock { $0 = before }
            #expect(try await daemon.notify(["send", "page.live", "hello, browser"]).status == 0)
            _ = try await page.evaluate(Self.once("document.querySelector('tr[data-topic=\"page.live\"] td.value')?.textContent === 'hello, browser'", "true"))
            seen.withLock { $0 = true }
            let shot = try await page.call("Page.captureScreenshot", ["format": "png"])
            screenshot.withLock { $0 = (shot["data"] as? String).flatMap { Data(base64Encoded: $0) } }
        }
        #expect(listed.withLock { $0 } == "written on the server")
        // The message appeared (the page's own wait, within the deadline of withPage): how long it took is the
        // suite's load as much as the page's, so it is not a pass mark here.
        #expect(seen.withLock { $0 })
        let png = try #require(screenshot.withLock { $0 })
        #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47]) && png.count > 5_000)
        // script/page-screenshot keeps it in docs/.
        if let path = ProcessInfo.processInfo.environment["NOTIFYD_PAGE_SCREENSHOT"] { try png.write(to: URL(fileURLWithPath: path)) }
        try await gateway.stop()
        try await daemon.stop()
    }
}

extension GatewayPageBrowserTests {
    @Test("a page that falls behind (2,000 messages of 1 KiB at once, read at 64 KB/s) says how many it missed")
    func pageSaysWhatItMissed() async throws {
        let daemon = try await TestDaemon.start()
        // The stream holds 16 KiB for a reader that falls behind: the burst cannot fit.
        let gateway = try await TestGateway.start(for: daemon, arguments: ["--stream-buffer", "16384"])
        let browser = try await HeadlessChromium.start(profile: daemon.directory.path + "/chromium")
        defer { browser.stop() }
        let status = Shared<String?>(nil)
        try await browser.withPage { page in
            try await page.navigate(gateway.url("/?filter=page.flood&auth=\(gateway.auth)"))
            _ = try await page.evaluate(Self.once("document.getElementById('status').textContent === 'live'", "true"))
            // A slow network, as a phone's: the page reads its stream at 64 KB/s.
            _ = try await page.call("Network.enable")
            _ = try await page.call("Network.emulateNetworkConditions", [
                "offline": false, "latency": 0, "downloadThroughput": 65_536, "uploadThroughput": -1,
            ])
            let padding = String(repeating: "x", count: 1_000)
            let lines = (1...2_000).map { "m\($0) \(padding)" }.joined(separator: "\n") + "\n"
            #expect(try await daemon.notify(["send", "page.flood", "--lines"], input: Array(lines.utf8)).status == 0)
            let said = try await page.evaluate(Self.once("/dropped/.test(document.getElementById('status').textContent)", "document.getElementById('status').textContent"))
            status.withLock { $0 = said as? String }
        }
        let said = try #require(status.withLock { $0 })
        let count = Int(said.prefix { $0.isNumber }) ?? 0
        #expect(count > 0 && said.contains("messages dropped"), "\(said)")
        try await gateway.stop()
        try await daemon.stop()
    }
}
