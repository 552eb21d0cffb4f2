/// The headers of a NATS message (`HPUB`, `HMSG`): a version line, `NATS/1.0`, optionally followed by a status code
/// and description (`NATS/1.0 503` for a request nobody answers), then `Name: value` lines, then an empty line.
/// Names keep their case and order, and may repeat, as the protocol allows.
public struct NATSHeaders: Sendable, Hashable {
    /// The status of a message the server made (503: no responders; 404, 408: JetStream), if any.
    public var status: Int?
    /// The status's description, as the server wrote it.
    public var statusDescription: String?
    /// The fields, in order.
    public private(set) var fields: [(name: String, value: String)] = []

    public init(status: Int? = nil, statusDescription: String? = nil) {
        self.status = status
        self.statusDescription = statusDescription
    }

    /// Appends a field. A name may not hold `:`, a space or a line break, nor a value a line break: the caller's
    /// values are the daemon's own (host, uid, …), so such a field is a programming error.
    public mutating func append(_ name: String, _ value: String) {
        precondition(!name.isEmpty && !name.contains(where: { $0 == ":" || $0 == " " || $0.isNewline }), "bad header name \(name)")
        precondition(!value.contains(where: \.isNewline), "bad header value for \(name)")
        fields.append((name, value))
    }

    /// The first value of `name`, compared without regard to case.
    public subscript(name: String) -> String? {
        let wanted = name.lowercased()
        return fields.first { $0.name.lowercased() == wanted }?.value
    }

    public static func == (lhs: NATSHeaders, rhs: NATSHeaders) -> Bool {
        lhs.status == rhs.status && lhs.statusDescription == rhs.statusDescription
            && lhs.fields.map(\.name) == rhs.fields.map(\.name) && lhs.fields.map(\.value) == rhs.fields.map(\.value)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(status)
        for field in fields {
            hasher.combine(field.name)
            hasher.combine(field.value)
        }
    }

    /// The headers as they go on the wire.
    var encoded: String {
        var text = "NATS/1.0"
        if let status { text += " \(status)" + (statusDescription.map { " " + $0 } ?? "") }
        text += "\r\n"
        for field in fields { text += "\(field.name): \(field.value)\r\n" }
        return text + "\r\n"
    }

    /// Reads headers from their wire form.
    init?(parsing text: Substring) {
        var lines = text.split(separator: "\r\n", omittingEmptySubsequences: false)[...]
        guard let first = lines.popFirst(), first.hasPrefix("NATS/1.0") else { return nil }
        let rest = first.dropFirst("NATS/1.0".count).drop { $0 == " " }
        if !rest.isEmpty {
            let parts = rest.split(separator: " ", maxSplits: 1)
            guard let code = Int(parts[0]) else { return nil }
            status = code
            if parts.count > 1 { statusDescription = String(parts[1]) }
        }
        for line in lines where !line.isEmpty {
            guard let colon = line.firstIndex(of: ":") else { return nil }
            let name = line[..<colon]
            let value = line[line.index(after: colon)...].drop { $0 == " " || $0 == "\t" }
            fields.append((String(name), String(value)))
        }
    }
}
