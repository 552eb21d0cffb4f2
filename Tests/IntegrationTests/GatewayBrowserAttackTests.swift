import Foundation
import Testing

/// What issue 46 reproduced in a real browser, tried again in headless Chromium against the real gateway: a page of
/// another origin, and a name rebound to 127.0.0.1, get nothing from a gateway on loopback.
@Suite("HTTP gateway: web pages of other sites in headless Chromium", .timeLimit(.minutes(3)))
struct GatewayBrowserAttackTests {
    @Test("a page of another origin (even one that knows the token) can neither publish with no-cors POSTs nor read through a WebSocket; a name rebound to 127.0.0.1 is refused")
    func otherSitesPages() async throws {
        let daemon = try await TestDaemon.start()
        #expect(try await daemon.notify(["send", "secret.topic", "not for pages"]).status == 0)
        let gateway = try await TestGateway.start(for: daemon)
        // rebound.example resolves to 127.0.0.1 in this browser, as a DNS rebinding attack makes it.
        let browser = try await HeadlessChromium.start(
            profile: daemon.directory.path + "/chromium", arguments: ["--host-resolver-rules=MAP rebound.example 127.0.0.1"]
        )
        defer { browser.stop() }
        let base = "http://127.0.0.1:\(gateway.port)", auth = gateway.auth
        let outcomes = Shared<[String: String]>([:])
        try await browser.withPage { page in
            // A page of no site at all (its origin is null), then one of another site's origin.
            for origin in ["data:text/html,<title>elsewhere</title>", "http://rebound.example:\(gateway.port)/"] {
                try await page.navigate(origin)
                let attack = """
                    (async () => {
                      const posted = await fetch('\(base)/gw.cross?auth=\(auth)', {method: 'POST', mode: 'no-cors', body: 'forged'})
                        .then(() => 'sent', () => 'failed');
                      const socket = await new Promise(resolve => {
                        const ws = new WebSocket('ws://127.0.0.1:\(gateway.port)/%3E/ws?since=all&auth=\(auth)');
                        ws.onmessage = e => { resolve('read: ' + e.data.slice(0, 60)); ws.close(); };
                        ws.onerror = () => resolve('refused');
                      });
                      const own = await fetch('/gw.cross?auth=\(auth)', {method: 'POST', body: 'rebound'})
                        .then(r => String(r.status), () => 'failed');
                      return posted + ' | ' + socket + ' | ' + own;
                    })()
                    """
                let outcome = try await page.evaluate(attack) as? String ?? "nothing"
                outcomes.withLock { $0[origin] = outcome }
            }
        }
        let results = outcomes.withLock { $0 }
        for (origin, outcome) in results {
            #expect(outcome.contains("| refused |"), "\(origin): the WebSocket was opened: \(outcome)")
        }
        // The rebound name's page is the gateway's own path under another name: refused by its Host.
        #expect(results["http://rebound.example:\(gateway.port)/"]?.hasSuffix("| 403") == true, "\(results)")
        #expect(try await daemon.notify(["latest", "gw.cross"]).status == 1, "a page published: \(results)")
        try await gateway.stop()
        try await daemon.stop()
    }
}
