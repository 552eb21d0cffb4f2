import Hummingbird
import NIOCore
import NotifyBus

/// `GET /metrics`: the daemon's counters (its `STATS`) and the gateway's own, in Prometheus's text format, behind the
/// same token check as every route.
extension HTTPGateway {
    /// The daemon's `STATS` names that count up from the daemon's start (exposed as `notifyd_<name>_total`); the rest
    /// are gauges, the fleet's too (`notifyd_<name>`), and names a newer daemon adds come as gauges.
    static let daemonCounters: Set<String> = [
        "connections_total", "messages_in", "messages_out", "bytes_in", "bytes_out", "dropped", "reloads",
        "reloads_failed", "state_log_failures", "nats_imported", "nats_clears_imported", "nats_import_refused",
        "nats_import_repeats", "nats_not_exported", "nats_connects", "nats_exported", "nats_import_not_sent",
        "nats_latest_coalesced",
    ]

    /// What each of the daemon's counters means, in one line (PROTOCOL.md, STATS); the fleet's are in
    /// docs/federation.md.
    static let daemonHelp: [String: String] = [
        "connections": "Connections open now.",
        "connections_total": "Connections accepted since the daemon started.",
        "subscriptions": "Subscriptions held now.",
        "topics": "Topics known.",
        "retained": "Topics with a buffered message.",
        "retained_bytes": "Payload bytes of the buffered messages.",
        "history_messages": "Messages the topics' histories keep.",
        "history_bytes": "Payload bytes of the messages the histories keep.",
        "messages_in": "Publishes accepted.",
        "messages_out": "Deliveries sent.",
        "bytes_in": "Payload bytes of the publishes accepted.",
        "bytes_out": "Payload bytes of the deliveries sent.",
        "dropped": "Deliveries dropped for subscribers that fell behind.",
        "queued_bytes": "Bytes waiting now for connections that fell behind.",
        "uptime_seconds": "Seconds since the daemon started.",
        "reloads": "Configurations applied since the daemon started.",
        "reloads_failed": "Reloads refused because the configuration file could not be used.",
        "pid": "The daemon's process id.",
        "state_log_unsaved": "1 while the state log cannot be written (retained publishes are refused), else 0.",
        "state_log_failures": "Times a write or sync of the state log failed since the daemon started.",
        "fleet_linked": "1 while the fleet service follows the daemon.",
    ]

    func prometheusMetrics() async -> Response {
        var text = PrometheusText()
        let stats: ServerStats?
        do {
            stats = try await daemon().stats()
        } catch {
            stats = nil
        }
        text.single("notifyd_up", .gauge, help: "1 when the daemon answered the gateway's STATS for this scrape, else 0.", stats == nil ? 0 : 1)
        // The gateway's own first: a name the fleet service reports (it may name its counters as it likes) never
        // takes the place of one of them, nor comes twice (the page would be refused whole).
        text.family("notifyd_http_info", .gauge, help: "The gateway: its version and the daemon's socket it serves.")
        text.sample("notifyd_http_info", labels: ["version": NotifydRelease.version, "socket": configuration.socketPath], 1)
        text.single("notifyd_http_streams", .gauge, help: "Streams open now (SSE, JSON, raw, WebSocket).", UInt64(streamLimits.count))
        text.single("notifyd_http_streams_opened_total", .counter, help: "Streams opened since the gateway started.", metrics.opened)
        text.single("notifyd_http_stream_bytes_total", .counter, help: "Bytes written to streams.", metrics.bytes)
        text.single(
            "notifyd_http_stream_dropped_total",
            .counter,
            help: "Messages streams' readers were told were dropped (by the daemon, or by a stream's queue for a reader that stopped).",
            metrics.drops
        )
        text.family("notifyd_http_requests_total", .counter, help: "Responses by HTTP status, refusals included (this scrape's own is counted once it is written).")
        for (status, count) in metrics.requests {
            text.sample("notifyd_http_requests_total", labels: ["status": String(status)], count)
        }
        for counter in stats?.counters ?? [] {
            let isCounter = HTTPGateway.daemonCounters.contains(counter.name)
            let name = "notifyd_" + counter.name + (isCounter && !counter.name.hasSuffix("_total") ? "_total" : "")
            let help = HTTPGateway.daemonHelp[counter.name] ?? "The daemon's \(counter.name) (STATS; see docs/federation.md for the fleet's)."
            text.single(name, isCounter ? .counter : .gauge, help: help, counter.value)
        }
        return Response(
            status: .ok,
            headers: [.contentType: PrometheusText.contentType],
            body: .init(byteBuffer: ByteBuffer(string: text.text))
        )
    }
}
