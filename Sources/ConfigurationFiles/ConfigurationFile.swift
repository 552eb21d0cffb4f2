package import Configuration

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The daemon's configuration file, as a swift-configuration provider.
///
/// The format is the one systemd units use, which administrators know: `key = value` lines, `#` or `;` comments on
/// lines of their own, blank lines, and `[section]` headers whose name prefixes the keys after them
/// (`[limits]` then `max-payload = 1` is `limits.max-payload`). Values are text, converted when a setting is read,
/// so a value that does not fit its setting is reported with its line.
///
/// Hand-written rather than YAML: the YAML library brings all of Foundation with it, which made the daemon three
/// times larger and doubled its idle memory.
package struct ConfigurationFile: ConfigProvider {
    package struct Entry: Sendable {
        package var text: String
        package var line: Int
    }

    package let path: String
    package let entries: [String: Entry]

    package var providerName: String { "configuration file \(path)" }

    /// The configuration file of the daemon and its fleet service: `explicit`, else `notifyd.conf` in systemd's
    /// `$CONFIGURATION_DIRECTORY` (`ConfigurationDirectory=`), else `/etc/notifyd/notifyd.conf` for root and
    /// `$XDG_CONFIG_HOME/notifyd/notifyd.conf` (`~/.config/…`) for another user.
    package static func path(explicit: String?) -> (path: String, isExplicit: Bool) {
        if let explicit { return (explicit, true) }
        func environment(_ name: String) -> String? { getenv(name).map { String(cString: $0) } }
        if let fromSystemd = environment("CONFIGURATION_DIRECTORY"), !fromSystemd.isEmpty {
            return (String(fromSystemd.split(separator: ":").first ?? Substring(fromSystemd)) + "/notifyd.conf", false)
        }
        if getuid() == 0 { return ("/etc/notifyd/notifyd.conf", false) }
        let home = environment("HOME") ?? "/"
        let base = environment("XDG_CONFIG_HOME").flatMap { $0.hasPrefix("/") ? $0 : nil } ?? home + "/.config"
        return (base + "/notifyd/notifyd.conf", false)
    }

    /// Reads and parses the file; nil when it does not exist and `mustExist` is false.
    package static func read(path: String, mustExist: Bool) throws(ConfigurationError) -> ConfigurationFile? {
        guard let file = fopen(path, "r") else {
            let code = errno
            if code == ENOENT && !mustExist { return nil }
            throw ConfigurationError(path: path, problem: "cannot be read: \(String(cString: strerror(code)))")
        }
        defer { fclose(file) }
        var lines: [String] = []
        var buffer: UnsafeMutablePointer<CChar>?
        var capacity = 0
        defer { free(buffer) }
        while getline(&buffer, &capacity, file) >= 0 {
            lines.append(String(cString: buffer!))
        }
        return try parse(lines, path: path)
    }

    /// Parses the lines of a file.
    package static func parse(_ lines: [String], path: String) throws(ConfigurationError) -> ConfigurationFile {
        var entries: [String: Entry] = [:]
        var section = ""
        for (index, raw) in lines.enumerated() {
            let number = index + 1
            let line = trimmed(raw)
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("[") {
                guard line.hasSuffix("]"), line.count > 2 else {
                    throw ConfigurationError(path: path, line: number, problem: "a section header is [name], not \(line)")
                }
                section = trimmed(String(line.dropFirst().dropLast())) + "."
                continue
            }
            guard let equals = line.firstIndex(of: "=") else {
                throw ConfigurationError(path: path, line: number, problem: "expected `key = value`, found \"\(line)\"")
            }
            let key = section + trimmed(String(line[..<equals]))
            let value = trimmed(String(line[line.index(after: equals)...]))
            guard key.count > section.count else {
                throw ConfigurationError(path: path, line: number, problem: "a setting needs a name before the =")
            }
            if let earlier = entries[key] {
                throw ConfigurationError(path: path, line: number, problem: "\(key) is set twice (also on line \(earlier.line))")
            }
            entries[key] = Entry(text: value, line: number)
        }
        return ConfigurationFile(path: path, entries: entries)
    }

    private static func trimmed(_ text: String) -> String {
        let isBlank: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" }
        return String(text.drop(while: isBlank).reversed().drop(while: isBlank).reversed())
    }

    /// The line a setting is on, for error messages.
    package func line(of key: String) -> Int? { entries[key]?.line }

    /// The settings of a `[section]` whose keys are names the administrator chooses (such as `[rules]`), in the
    /// order of the file.
    package func entries(in section: String) -> [(name: String, entry: Entry)] {
        let prefix = section + "."
        return entries.filter { $0.key.hasPrefix(prefix) }
            .map { (String($0.key.dropFirst(prefix.count)), $0.value) }
            .sorted { $0.entry.line < $1.entry.line }
    }

    /// Settings the file sets that are not in `known`, with their lines.
    package func unknownKeys(_ known: Set<String>, sections: Set<String> = []) -> [(key: String, line: Int)] {
        entries.filter { entry in
            !known.contains(entry.key) && !sections.contains { entry.key.hasPrefix($0 + ".") }
        }.map { ($0.key, $0.value.line) }.sorted { $0.line < $1.line }
    }

    // MARK: - ConfigProvider

    package func value(forKey key: AbsoluteConfigKey, type: ConfigType) throws -> LookupResult {
        let name = key.components.joined(separator: ".")
        guard let entry = entries[name] else { return LookupResult(encodedKey: name, value: nil) }
        let content: ConfigContent
        switch type {
        case .string:
            content = .string(entry.text)
        case .int:
            guard let number = Int(entry.text) else { throw ConfigurationError(path: path, line: entry.line, problem: "\(name) must be a whole number, not \"\(entry.text)\"") }
            content = .int(number)
        case .double:
            guard let number = Double(entry.text) else { throw ConfigurationError(path: path, line: entry.line, problem: "\(name) must be a number, not \"\(entry.text)\"") }
            content = .double(number)
        case .bool:
            switch entry.text.lowercased() {
            case "yes", "true", "on", "1": content = .bool(true)
            case "no", "false", "off", "0": content = .bool(false)
            default: throw ConfigurationError(path: path, line: entry.line, problem: "\(name) must be yes or no, not \"\(entry.text)\"")
            }
        case .stringArray:
            content = .stringArray(entry.text.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init))
        default:
            throw ConfigurationError(path: path, line: entry.line, problem: "\(name) cannot be read as \(type)")
        }
        return LookupResult(encodedKey: name, value: ConfigValue(content, isSecret: false))
    }

    package func fetchValue(forKey key: AbsoluteConfigKey, type: ConfigType) async throws -> LookupResult {
        try value(forKey: key, type: type)
    }

    // The protocol's module makes async closures nonisolated(nonsending) by default; this one has to say so.
    package nonisolated(nonsending) func watchValue<Return: ~Copyable>(
        forKey key: AbsoluteConfigKey,
        type: ConfigType,
        updatesHandler: nonisolated(nonsending) (ConfigUpdatesAsyncSequence<Result<LookupResult, any Error>, Never>) async throws -> Return
    ) async throws -> Return {
        // The file is read once; SIGHUP makes a new provider rather than updating this one.
        try await watchValueFromValue(forKey: key, type: type, updatesHandler: updatesHandler)
    }

    package func snapshot() -> any ConfigSnapshot { self }

    package nonisolated(nonsending) func watchSnapshot<Return: ~Copyable>(
        updatesHandler: nonisolated(nonsending) (ConfigUpdatesAsyncSequence<any ConfigSnapshot, Never>) async throws -> Return
    ) async throws -> Return {
        try await watchSnapshotFromSnapshot(updatesHandler: updatesHandler)
    }
}

extension ConfigurationFile: ConfigSnapshot {}
