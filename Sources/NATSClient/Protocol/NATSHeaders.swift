public import NIOCore

/// The headers of a NATS message (`HPUB`, `HMSG`): a version line, `NATS/1.0`, optionally followed by a status code
/// and description (`NATS/1.0 503` for a request nobody answers), then `Name: value` lines, then an empty line.
/// Names keep their case and order, and may repeat, as the protocol allows.
///
/// Headers read from the wire stay the bytes they came as (a view of the read buffer, no copy) until asked for:
/// ``forEachField(_:)`` reads them without making a `String`, which a receiver of many messages wants.
public struct NATSHeaders: Sendable, Hashable {
    /// The status of a message the server made (503: no responders; 404, 408: JetStream), if any.
    public var status: Int?
    /// The status's description, as the server wrote it.
    public var statusDescription: String?
    /// Fields appended by this program.
    private var appended: [(name: String, value: String)] = []
    /// The field lines as received (after the version line, up to the empty line), for headers read from the wire.
    private var received: ByteBuffer?

    public init(status: Int? = nil, statusDescription: String? = nil) {
        self.status = status
        self.statusDescription = statusDescription
    }

    /// The fields, in order.
    public var fields: [(name: String, value: String)] {
        var all: [(name: String, value: String)] = []
        forEachField { name, value in
            all.append((String(decoding: name, as: UTF8.self), String(decoding: value, as: UTF8.self)))
        }
        return all + appended
    }

    /// Appends a field. A name may not hold `:`, a space or a line break, nor a value a line break: the caller's
    /// values are the daemon's own (host, uid, …), so such a field is a programming error.
    public mutating func append(_ name: String, _ value: String) {
        precondition(!name.isEmpty && !name.utf8.contains(where: { $0 == UInt8(ascii: ":") || $0 <= 0x20 }), "bad header name \(name)")
        precondition(!value.utf8.contains(where: { $0 == UInt8(ascii: "\r") || $0 == UInt8(ascii: "\n") }), "bad header value for \(name)")
        appended.append((name, value))
    }

    /// The first value of `name`, compared without regard to case.
    public subscript(name: String) -> String? {
        var found: String?
        var wanted = name
        wanted.withUTF8 { wanted in
            forEachField { fieldName, value in
                if found == nil, Self.equalIgnoringCase(fieldName, wanted) { found = String(decoding: value, as: UTF8.self) }
            }
        }
        if found != nil { return found }
        return appended.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    /// Calls `body` with the bytes of each field read from the wire, in order: the name, and the value without the
    /// blanks after the colon. Valid only during the call.
    public func forEachField(_ body: (_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) -> Void) {
        received?.withUnsafeReadableBytes { bytes in
            var start = 0
            while start < bytes.count {
                var end = start
                while end + 1 < bytes.count, !(bytes[end] == UInt8(ascii: "\r") && bytes[end + 1] == UInt8(ascii: "\n")) { end += 1 }
                if end + 1 >= bytes.count { end = bytes.count }
                if end > start, let colon = (start..<end).first(where: { bytes[$0] == UInt8(ascii: ":") }) {
                    var valueStart = colon + 1
                    while valueStart < end, bytes[valueStart] == UInt8(ascii: " ") || bytes[valueStart] == UInt8(ascii: "\t") { valueStart += 1 }
                    body(UnsafeRawBufferPointer(rebasing: bytes[start..<colon]), UnsafeRawBufferPointer(rebasing: bytes[valueStart..<end]))
                }
                start = end + 2
            }
        }
    }

    /// Whether `a` and `b` are the same ASCII text but for case.
    public static func equalIgnoringCase(_ a: UnsafeRawBufferPointer, _ b: UnsafeBufferPointer<UInt8>) -> Bool {
        guard a.count == b.count else { return false }
        for index in 0..<a.count where a[index] | 0x20 != b[index] | 0x20 {
            return false
        }
        return true
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

    /// Reads headers from their wire form, `block` being exactly the header bytes of a message; nil when they do not
    /// start with `NATS/1.0`.
    public init?(parsing block: ByteBuffer) {
        let version = "NATS/1.0"
        guard block.readableBytesView.starts(with: version.utf8) else { return nil }
        let view = block.readableBytesView
        var lineEnd = view.startIndex
        while lineEnd + 1 < view.endIndex, !(view[lineEnd] == UInt8(ascii: "\r") && view[lineEnd + 1] == UInt8(ascii: "\n")) { lineEnd += 1 }
        // The first line is only read as text when it says more than the version (a status): every message has
        // headers, and a string made for each would be most of what reading them costs.
        if lineEnd - view.startIndex > version.utf8.count {
            let firstLine = block.getString(at: block.readerIndex, length: lineEnd - view.startIndex) ?? version
            let rest = firstLine.dropFirst(version.count).drop { $0 == " " }
            if !rest.isEmpty {
                let parts = rest.split(separator: " ", maxSplits: 1)
                guard let code = Int(parts[0]) else { return nil }
                status = code
                if parts.count > 1 { statusDescription = String(parts[1]) }
            }
        }
        let fieldsStart = min(lineEnd + 2, view.endIndex) - view.startIndex
        received = block.getSlice(at: block.readerIndex + fieldsStart, length: block.readableBytes - fieldsStart)
    }
}
