import ConfigurationFiles

/// What the fleet service runs with: the daemon's socket and the `[nats]` section of the configuration file the
/// daemon reads too (`notifyd.conf`: one file for the host), each value given on the command line winning.
package struct FleetSettings: Sendable, Equatable {
    /// The NATS side: servers, patterns, host name, TLS and login, catch-up.
    package var bridge: BridgeSettings
    /// The file read, for messages.
    package var path: String

    /// The values given on the command line (`--nats`, `--nats-export`, …, `--host-name`), which win over the file.
    package struct Overrides: Sendable {
        package var servers: [String] = []
        package var exports: [String] = []
        package var imports: [String] = []
        package var prefix: String?
        package var hostName: String?
        package var outboxBytes: Int?
        package var streamReplicas: Int?
        package var security = BridgeSecurity.Options()
        package var catchUp: String?
        package var catchUpBytes: Int?

        package init() {}
    }

    /// Reads the settings; an error names the file and line, or the option, and never a secret.
    package static func load(overrides: Overrides, configurationFile: String?) throws -> FleetSettings {
        let (path, isExplicit) = ConfigurationFile.path(explicit: configurationFile)
        let file = try ConfigurationFile.read(path: path, mustExist: isExplicit)
        var section: [String: (text: String, line: Int)] = [:]
        for (name, entry) in file?.entries(in: "nats") ?? [] { section[name] = (entry.text, entry.line) }
        let bridge = try BridgeSettings.resolve(
            servers: overrides.servers,
            exports: overrides.exports,
            imports: overrides.imports,
            prefix: overrides.prefix,
            hostName: overrides.hostName,
            outboxBytes: overrides.outboxBytes,
            streamReplicas: overrides.streamReplicas,
            security: overrides.security,
            catchUp: overrides.catchUp,
            catchUpBytes: overrides.catchUpBytes,
            section: section,
            path: path
        )
        guard let bridge else {
            throw ConfigurationError(
                path: path,
                problem: "names no NATS server: give --nats nats://HOST:PORT, or servers = under [nats] (the fleet service has nothing to do without one)"
            )
        }
        return FleetSettings(bridge: bridge, path: path)
    }
}
