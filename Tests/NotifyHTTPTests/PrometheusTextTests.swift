import Testing
import TestSupport

@testable import NotifyHTTP

/// The `/metrics` page's writer (no socket): what a scraper reads back is what was written.
@Suite("Prometheus's text format, as the gateway writes it (no socket)", .timeLimit(.minutes(1)))
struct PrometheusTextTests {
    @Test("families with HELP and TYPE, samples with labels; escapes a scraper reads back; names made valid")
    func writesWhatAScraperReads() throws {
        var text = PrometheusText()
        text.single("notifyd_messages_in_total", .counter, help: "Publishes accepted.", 42)
        text.family("notifyd_http_info", .gauge, help: "back\\slash and\nline break")
        let awkward = "/run/we\"ird\\dir\nnext\r\nend"
        text.sample("notifyd_http_info", labels: ["socket": awkward, "version": "0.1.0"], 1)
        text.family("notifyd_http_requests_total", .counter, help: "By status.")
        text.sample("notifyd_http_requests_total", labels: ["status": "200"], 7)
        text.sample("notifyd_http_requests_total", labels: ["status": "401"], 2)
        text.single("9bad-name.x", .gauge, help: "Made valid.", 3)

        let page = try PrometheusExposition(parsing: text.text)
        #expect(page.value("notifyd_messages_in_total") == 42)
        #expect(page.types["notifyd_messages_in_total"] == "counter")
        #expect(page.help["notifyd_http_info"] == "back\\slash and\nline break")
        #expect(page.value("notifyd_http_info", ["socket": awkward, "version": "0.1.0"]) == 1, "the label read back as it was")
        #expect(page.value("notifyd_http_requests_total", ["status": "401"]) == 2)
        #expect(page.value("_bad_name_x") == 3)
        #expect(!text.text.contains("\r\n"), "no line break left in a value")
    }

    @Test("a name comes once: a second family of it (the fleet's report naming one of the gateway's, or two names alike once made valid) is left out")
    func namesComeOnce() throws {
        var text = PrometheusText()
        text.single("notifyd_http_streams", .gauge, help: "The gateway's.", 3)
        text.single("notifyd_http_streams", .gauge, help: "A report's.", 99)
        text.single("notifyd_a.b", .gauge, help: "First.", 1)
        text.single("notifyd_a_b", .gauge, help: "Alike once made valid.", 2)
        let page = try PrometheusExposition(parsing: text.text)
        #expect(page.value("notifyd_http_streams") == 3 && page.value("notifyd_a_b") == 1)
        #expect(page.samples.count == 2)
    }

    @Test("the reader refuses what a scraper would: a bad escape, a TYPE after samples, a family split, no final line break")
    func readerIsStrict() {
        for bad in [
            "x{a=\"\\q\"} 1\n",
            "x 1\n# TYPE x gauge\n",
            "x 1\ny 1\nx 2\n",
            "x 1",
            "x{a=\"1\" 1\n",
            "1x 1\n",
        ] {
            #expect(throws: PrometheusExposition.Invalid.self, "\(bad)") { try PrometheusExposition(parsing: bad) }
        }
    }
}
