import Foundation
import NotifyBus
import Testing
import TestSupport

/// `GET /metrics` of a real notifyd-http in front of a real notifyd, read as Prometheus reads it (issue 49, item 3).
@Suite("HTTP gateway: /metrics for Prometheus (real notifyd, notifyd-http and curl)", .timeLimit(.minutes(5)))
struct GatewayMetricsTests {
    @Test("/metrics is behind the token; it serves the daemon's STATS and the gateway's counters in Prometheus's text format, names, types, HELP and labels as a scraper reads them")
    func metrics() async throws {
        let daemon = try await TestDaemon.start()
        let gateway = try await TestGateway.start(for: daemon)

        let refused = try await TestGateway.curl(["-o", "/dev/null", "-w", "%{http_code}", gateway.url("/metrics")])
        #expect(refused.output == "401", "no token, no metrics")

        for message in 1...3 {
            let published = try await gateway.curl(["-o", "/dev/null", "-w", "%{http_code}", "-d", "m\(message)", gateway.url("/metrics.test")])
            #expect(published.output == "200")
        }
        // A stream open while the page is read, with a message through it.
        let stream = try gateway.curlProcess(["-D", "/dev/stderr", gateway.url("/metrics.test/json")])
        try await stream.standardError.wait("the stream's headers") { $0.contains("200 OK") }
        _ = try await gateway.curl(["-d", "through the stream", gateway.url("/metrics.test")])
        try await stream.standardOutput.wait("the message on the stream") { $0.contains("through the stream") }

        let type = try await gateway.curl(["-o", "/dev/null", "-w", "%{content_type}", gateway.url("/metrics")])
        #expect(type.output == "text/plain; version=0.0.4; charset=utf-8")
        let scraped = try await gateway.curl([gateway.url("/metrics")])
        #expect(scraped.status == 0)
        let page = try PrometheusExposition(parsing: scraped.output)

        #expect(page.value("notifyd_up") == 1)
        #expect(page.value("notifyd_messages_in_total").map { $0 >= 4 } == true, "4 publishes through the gateway")
        #expect(page.types["notifyd_messages_in_total"] == "counter" && page.types["notifyd_connections"] == "gauge")
        #expect(page.value("notifyd_connections").map { $0 >= 2 } == true, "the gateway's shared link and the stream's")
        #expect(page.value("notifyd_state_log_unsaved") == 0 && page.value("notifyd_state_log_failures_total") == 0)
        #expect(page.value("notifyd_retained") == 1)
        #expect(page.value("notifyd_http_streams") == 1)
        #expect(page.value("notifyd_http_streams_opened_total") == 1)
        #expect(page.value("notifyd_http_stream_bytes_total").map { $0 > 0 } == true)
        #expect(page.value("notifyd_http_requests_total", ["status": "401"]) == 1)
        #expect(page.value("notifyd_http_requests_total", ["status": "200"]).map { $0 >= 5 } == true, "4 publishes and a scrape")
        #expect(page.value("notifyd_http_info", ["socket": daemon.socketPath, "version": NotifydRelease.version]) == 1)
        for sample in page.samples {
            #expect(page.types[sample.name] != nil && page.help[sample.name] != nil, "\(sample.name) has its TYPE and HELP")
        }

        stream.signal(SIGTERM)
        _ = try await stream.exitStatus()
        try await gateway.stop()
        try await daemon.stop()
    }

    @Test("with the daemon gone, /metrics still answers: notifyd_up 0 and the gateway's own")
    func daemonDown() async throws {
        let daemon = try await TestDaemon.start()
        let gateway = try await TestGateway.start(for: daemon)
        try await daemon.stop()
        let scraped = try await gateway.curl([gateway.url("/metrics")], timeout: .seconds(60))
        let page = try PrometheusExposition(parsing: scraped.output)
        #expect(page.value("notifyd_up") == 0)
        #expect(page.value("notifyd_http_streams") == 0)
        try await gateway.stop()
    }
}
