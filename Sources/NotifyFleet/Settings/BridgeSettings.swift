import NATSClient
import ConfigurationFiles

package import NotifyProtocol

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// How the daemon joins a NATS cluster (`--nats`, or the configuration file's `[nats]` section): which servers, what
/// crosses in each direction, under which subject prefix, as which host.
package struct BridgeSettings: Sendable, Equatable {
    /// A NATS server to connect to.
    package struct Server: Sendable, Equatable, CustomStringConvertible {
        var host: String
        var port: Int
        /// Whether the URL asks for TLS (`tls://`); with `nats://`, TLS is used when the server requires it.
        var tls = false

        /// `nats://HOST:PORT`, `tls://HOST:PORT`, `HOST:PORT` or `HOST` (port 4222). Credentials in the URL are
        /// refused with a sentence: secrets come from files.
        init(parsing text: String) throws(BridgeSettingsError) {
            var rest = Substring(text)
            if let colon = rest.firstIndex(of: ":"), rest[colon...].hasPrefix("://") {
                switch rest[..<colon] {
                case "nats": tls = false
                case "tls": tls = true
                default: throw BridgeSettingsError("\(text): a NATS server is nats://HOST:PORT or tls://HOST:PORT")
                }
                rest = rest[rest.index(colon, offsetBy: 3)...]
            }
            if rest.hasSuffix("/") { rest = rest.dropLast() }
            if let at = rest.lastIndex(of: "@") {
                // The sentence goes to the journal: it names the server, never what came before the `@`.
                let scheme = text.hasPrefix("tls://") ? "tls://" : text.hasPrefix("nats://") ? "nats://" : ""
                throw BridgeSettingsError(
                    "\(scheme)…@\(rest[rest.index(after: at)...]): no credentials in the URL (it shows in ps and the journal); give user and password-file (--nats-user, --nats-password-file), or another login file, instead"
                )
            }
            if rest.hasPrefix("[") {
                // An IPv6 address: [::1]:4222.
                guard let close = rest.firstIndex(of: "]") else { throw BridgeSettingsError("\(text): an unclosed [") }
                host = String(rest[rest.index(after: rest.startIndex)..<close])
                rest = rest[rest.index(after: close)...]
                port = 4222
                if rest.hasPrefix(":") {
                    guard let number = Int(rest.dropFirst()), (1...65535).contains(number) else {
                        throw BridgeSettingsError("\(text): the port must be 1 to 65535")
                    }
                    port = number
                } else if !rest.isEmpty {
                    throw BridgeSettingsError("\(text): expected nats://HOST:PORT")
                }
            } else if let colon = rest.lastIndex(of: ":") {
                host = String(rest[..<colon])
                guard let number = Int(rest[rest.index(after: colon)...]), (1...65535).contains(number) else {
                    throw BridgeSettingsError("\(text): the port must be 1 to 65535")
                }
                port = number
            } else {
                host = String(rest)
                port = 4222
            }
            guard !host.isEmpty, !host.contains(where: { $0 == " " || $0 == "/" }) else {
                throw BridgeSettingsError("\(text): expected nats://HOST:PORT")
            }
        }

        package var description: String {
            let scheme = tls ? "tls" : "nats"
            return host.contains(":") ? "\(scheme)://[\(host)]:\(port)" : "\(scheme)://\(host):\(port)"
        }
    }

    /// The servers, tried in order (several servers of one cluster, for failover).
    package var servers: [Server]
    /// Local topics sent to NATS.
    package var exports: [TopicPattern]
    /// Topics taken in from NATS.
    var imports: [TopicPattern]
    /// The first tokens of every subject the bridge uses: `<prefix>.<topic>`.
    var prefix: String
    /// This host's name in deliveries elsewhere, and in the messages it sends.
    package var hostName: String
    /// The most bytes of messages waiting to be sent while NATS cannot take them.
    var outboxBytes: Int
    /// Copies of the stream of latest messages a cluster keeps, when this daemon makes it (1 to 5).
    var streamReplicas = 1
    /// TLS and the login.
    var security = BridgeSecurity()
    /// How long the log (`<prefix>_log`) keeps what each host exported, for a host that is away, in seconds; 0: no
    /// catch-up (imports are read live only).
    var catchUpSeconds = BridgeSettings.defaultCatchUpSeconds
    /// The most bytes that stream keeps.
    var catchUpBytes = BridgeSettings.defaultCatchUpBytes

    static let defaultCatchUpSeconds: Int64 = 3600
    static let defaultCatchUpBytes = 256 << 20

    /// The TLS settings for `server`: the files of ``security``, required when its URL said `tls://`, and also for a
    /// `nats://` URL when an authority, a client certificate, a password or a token is given: whoever set them meant
    /// the connection to be private, and a server that offers no TLS must not get the secret in plain text.
    func tls(for server: Server) -> NATSTLSSettings {
        var tls = security.tls
        tls.isRequired = server.tls
        if !server.tls, let reason = security.tlsRequirement {
            tls.isRequired = true
            tls.requiredBecause = reason
        }
        return tls
    }

    static let defaultPrefix = "notifyd"
    static let defaultOutboxBytes = 16 << 20
    /// Every message waits in the outbox until the server confirms it, also while connected: room for a few.
    static let minimumOutboxBytes = 64 << 10

    /// The settings from the command line's values and the file's `[nats]` section (`servers`, `export`, `import`,
    /// `prefix`, `host-name`, `outbox-bytes`; lists separated by spaces or commas); nil when neither names a server.
    static func resolve(
        servers commandLineServers: [String],
        exports commandLineExports: [String],
        imports commandLineImports: [String],
        prefix commandLinePrefix: String?,
        hostName commandLineHostName: String?,
        outboxBytes commandLineOutboxBytes: Int?,
        streamReplicas commandLineReplicas: Int? = nil,
        security commandLineSecurity: BridgeSecurity.Options = BridgeSecurity.Options(),
        catchUp commandLineCatchUp: String? = nil,
        catchUpBytes commandLineCatchUpBytes: Int? = nil,
        section: [String: (text: String, line: Int)],
        path: String
    ) throws -> BridgeSettings? {
        let known = Set(
            ["servers", "export", "import", "prefix", "host-name", "outbox-bytes", "stream-replicas", "catch-up", "catch-up-bytes"]
                + BridgeSecurity.keys.map(\.key)
        )
        if let unknown = section.filter({ !known.contains($0.key) }).min(by: { $0.value.line < $1.value.line }) {
            throw ConfigurationError(
                path: path,
                line: unknown.value.line,
                problem: "unknown setting \"\(unknown.key)\" in [nats]; the settings there are \(known.sorted().joined(separator: ", "))"
            )
        }
        func list(_ key: String, _ given: [String]) -> [String] {
            if !given.isEmpty { return given }
            guard let text = section[key]?.text else { return [] }
            return text.split(whereSeparator: { $0 == " " || $0 == "," || $0 == "\t" }).map(String.init)
        }
        func failure(_ key: String, fromCommandLine: Bool, _ problem: String) -> ConfigurationError {
            ConfigurationError(path: fromCommandLine ? "command line" : path, line: fromCommandLine ? nil : section[key]?.line, problem: problem)
        }
        let serverTexts = list("servers", commandLineServers)
        if serverTexts.isEmpty {
            let given = [
                ("--nats-export", !commandLineExports.isEmpty), ("--nats-import", !commandLineImports.isEmpty),
                ("--nats-prefix", commandLinePrefix != nil), ("--host-name", commandLineHostName != nil),
                ("--nats-outbox-bytes", commandLineOutboxBytes != nil), ("--nats-stream-replicas", commandLineReplicas != nil),
                ("a --nats-tls-… or login option", !commandLineSecurity.isEmpty), ("--nats-catch-up", commandLineCatchUp != nil),
                ("--nats-catch-up-bytes", commandLineCatchUpBytes != nil),
            ].filter(\.1).map(\.0)
            if let option = given.first {
                throw BridgeSettingsError("\(option) needs a NATS server to share topics through: add --nats nats://HOST:PORT (or servers = under [nats])")
            }
            let others = (["export", "import", "prefix", "host-name", "outbox-bytes", "stream-replicas", "catch-up", "catch-up-bytes"] + BridgeSecurity.keys.map(\.key))
                .filter { section[$0] != nil }
            if let other = others.first {
                throw failure(other, fromCommandLine: false, "[nats] sets \(other) but names no servers; add servers = nats://HOST:PORT")
            }
            return nil
        }
        var servers: [Server] = []
        for text in serverTexts {
            do {
                servers.append(try Server(parsing: text))
            } catch {
                throw failure("servers", fromCommandLine: !commandLineServers.isEmpty, "nats server \(error)")
            }
        }
        func patterns(_ key: String, _ given: [String]) throws -> [TopicPattern] {
            let texts = list(key, given)
            if texts.isEmpty { return [try! TopicPattern(">")] }
            return try texts.map { text in
                do {
                    return try TopicPattern(text)
                } catch {
                    throw failure(key, fromCommandLine: !given.isEmpty, "nats \(key) pattern \"\(text)\": \(error)")
                }
            }
        }
        let prefix = commandLinePrefix ?? section["prefix"]?.text ?? defaultPrefix
        guard (try? Topic(prefix)) != nil, !prefix.hasPrefix("$"), !prefix.hasPrefix("_") else {
            throw failure(
                "prefix",
                fromCommandLine: commandLinePrefix != nil,
                "nats prefix \"\(prefix)\" must be dot-separated tokens without wildcards, not starting with $ or _"
            )
        }
        let hostName = commandLineHostName ?? section["host-name"]?.text ?? systemHostName()
        guard FleetImport.isValidHostName(hostName) else {
            throw failure(
                "host-name",
                fromCommandLine: commandLineHostName != nil,
                "host name \"\(hostName)\" must be 1 to 64 letters, digits, '.', '-' or '_'"
            )
        }
        var outboxBytes = commandLineOutboxBytes ?? defaultOutboxBytes
        if commandLineOutboxBytes == nil, let text = section["outbox-bytes"]?.text {
            guard let number = Int(text) else {
                throw failure("outbox-bytes", fromCommandLine: false, "outbox-bytes must be a whole number, not \"\(text)\"")
            }
            outboxBytes = number
        }
        guard (minimumOutboxBytes...(1 << 40)).contains(outboxBytes) else {
            throw failure(
                "outbox-bytes",
                fromCommandLine: commandLineOutboxBytes != nil,
                "outbox-bytes must be \(minimumOutboxBytes) to \(1 << 40), not \(outboxBytes)"
            )
        }
        var replicas = commandLineReplicas ?? 1
        if commandLineReplicas == nil, let text = section["stream-replicas"]?.text {
            guard let number = Int(text) else {
                throw failure("stream-replicas", fromCommandLine: false, "stream-replicas must be a whole number, not \"\(text)\"")
            }
            replicas = number
        }
        guard (1...5).contains(replicas) else {
            throw failure("stream-replicas", fromCommandLine: commandLineReplicas != nil, "stream-replicas must be 1 to 5 (JetStream's limit), not \(replicas)")
        }
        let catchUpText = commandLineCatchUp ?? section["catch-up"]?.text
        var catchUpSeconds = defaultCatchUpSeconds
        if let catchUpText {
            guard let seconds = Self.seconds(catchUpText), seconds <= 365 * 86_400 else {
                throw failure(
                    "catch-up",
                    fromCommandLine: commandLineCatchUp != nil,
                    "catch-up must be a duration such as 90s, 30m, 1h or 7d (at most 365d; 0 turns it off), not \"\(catchUpText)\""
                )
            }
            catchUpSeconds = seconds
        }
        var catchUpBytes = commandLineCatchUpBytes ?? defaultCatchUpBytes
        if commandLineCatchUpBytes == nil, let text = section["catch-up-bytes"]?.text {
            guard let number = Int(text) else {
                throw failure("catch-up-bytes", fromCommandLine: false, "catch-up-bytes must be a whole number, not \"\(text)\"")
            }
            catchUpBytes = number
        }
        guard ((1 << 20)...(1 << 40)).contains(catchUpBytes) else {
            throw failure(
                "catch-up-bytes",
                fromCommandLine: commandLineCatchUpBytes != nil,
                "catch-up-bytes must be \(1 << 20) to \(1 << 40), not \(catchUpBytes)"
            )
        }
        return BridgeSettings(
            servers: servers,
            exports: try patterns("export", commandLineExports),
            imports: try patterns("import", commandLineImports),
            prefix: prefix,
            hostName: hostName,
            outboxBytes: outboxBytes,
            streamReplicas: replicas,
            security: try BridgeSecurity.resolve(commandLineSecurity, section: section, path: path),
            catchUpSeconds: catchUpSeconds,
            catchUpBytes: catchUpBytes
        )
    }

    /// Seconds of a duration: a whole number with `s`, `m`, `h` or `d` after it, or none (seconds).
    static func seconds(_ text: String) -> Int64? {
        var digits = Substring(text)
        var unit: Int64 = 1
        switch digits.last {
        case "s": unit = 1
        case "m": unit = 60
        case "h": unit = 3600
        case "d": unit = 86_400
        case let last? where !last.isNumber: return nil
        default: break
        }
        if digits.last?.isLetter == true { digits = digits.dropLast() }
        guard !digits.isEmpty, digits.allSatisfy(\.isASCII), let number = Int64(digits), number >= 0 else { return nil }
        let (total, overflow) = number.multipliedReportingOverflow(by: unit)
        return overflow ? nil : total
    }

    /// The machine's hostname (gethostname(2)); `localhost` when it has none usable.
    static func systemHostName() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "localhost" }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return FleetImport.isValidHostName(name) ? name : "localhost"
    }

    /// The `[nats]` lines of `notifyd --check-config`.
    package var summary: String {
        """
        [nats]
        servers = \(servers.map(\.description).joined(separator: " "))
        export = \(exports.map(\.text).joined(separator: " "))
        import = \(imports.map(\.text).joined(separator: " "))
        prefix = \(prefix)
        host-name = \(hostName)
        outbox-bytes = \(outboxBytes)
        stream-replicas = \(streamReplicas)
        catch-up = \(catchUpSeconds == 0 ? "0" : "\(catchUpSeconds)s")
        catch-up-bytes = \(catchUpBytes)
        """ + security.summary.map { "\n" + $0 }.joined()
    }
}

/// A bridge setting that cannot be used.
struct BridgeSettingsError: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) {
        self.description = description
    }
}
