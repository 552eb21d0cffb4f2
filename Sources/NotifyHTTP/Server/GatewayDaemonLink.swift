import NotifyBus

/// The gateway's connection to the daemon for publishes and `latest`: made on first use (the daemon may start after
/// the gateway, as socket activation allows), then kept; the client library reconnects it when the daemon restarts.
actor GatewayDaemonLink {
    let socketPath: String
    private var client: NotifyClient?

    init(socketPath: String) {
        self.socketPath = socketPath
    }

    /// The shared client, connected now if it is not yet.
    func shared() async throws -> NotifyClient {
        if let client { return client }
        let client = try await NotifyClient.connect(to: socketPath, reconnectWithin: .seconds(10))
        self.client = client
        return client
    }

    func close() async {
        await client?.close()
        client = nil
    }
}
