/// Why a topic name or a subscription pattern was refused.
///
/// `description` is a complete sentence for a person: what is wrong and what a valid name looks like. It is safe
/// to put on one protocol line: control characters of the offending input are escaped.
public struct TopicError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The rule that was broken.
    public enum Reason: Sendable, Hashable {
        /// The name has no bytes at all.
        case empty
        /// The name is longer than the limit (255 bytes unless the daemon says otherwise).
        case tooLong(byteCount: Int, limit: Int)
        /// The bytes are not valid UTF-8.
        case invalidUTF8
        /// A whitespace or control character; these would make names ambiguous on the wire and in shells.
        case forbiddenCharacter(Unicode.Scalar)
        /// Two dots in a row, or a dot at either end.
        case emptyToken
        /// `*` or `>` in a name that is published to: a publish names exactly one topic.
        case wildcardInTopic
        /// `*` or `>` inside a token, as in `a*` or `>b`: wildcards stand alone between dots.
        case wildcardInsideToken
        /// `>` followed by more tokens: it matches everything after it, so it must come last.
        case fullWildcardNotLast
    }

    /// The rule that was broken.
    public let reason: Reason
    /// The refused input, rendered printable (invalid UTF-8 replaced, control characters escaped).
    public let input: String

    /// Creates an error for `input`, which is rendered printable.
    public init(_ reason: Reason, input: some Sequence<UInt8>) {
        self.reason = reason
        self.input = TopicError.printable(input)
    }

    public var description: String {
        switch reason {
        case .empty:
            return "the topic is empty; a topic is one or more dot-separated tokens such as backup.nightly.done"
        case .tooLong(let count, let limit):
            return "topic \"\(prefix)\" is \(count) bytes long; the limit is \(limit) bytes"
        case .invalidUTF8:
            return "topic \"\(input)\" is not valid UTF-8"
        case .forbiddenCharacter(let scalar):
            let code = "U+" + String(scalar.value, radix: 16, uppercase: true).leftPadded(to: 4)
            return "topic \"\(input)\" contains \(code); topics cannot contain whitespace or control characters"
        case .emptyToken:
            return "topic \"\(input)\" has an empty token; tokens are separated by single dots, with no dot at either end"
        case .wildcardInTopic:
            return "topic \"\(input)\" contains a wildcard; * and > are for subscribing, a publish names one topic"
        case .wildcardInsideToken:
            return "pattern \"\(input)\" has a wildcard inside a token; * and > must stand alone between dots, as in a.*.c or a.>"
        case .fullWildcardNotLast:
            return "pattern \"\(input)\" has > before the last token; > matches all remaining tokens, so it must come last"
        }
    }

    /// The start of a long input, so an error about a 1 MiB "topic" stays one readable line.
    private var prefix: String {
        input.count > 64 ? String(input.prefix(64)) + "…" : input
    }

    private static func printable(_ bytes: some Sequence<UInt8>) -> String {
        var out = ""
        for scalar in String(decoding: Array(bytes.prefix(512)), as: UTF8.self).unicodeScalars {
            if scalar.value < 0x20 || scalar.value == 0x7F || (0x80...0x9F).contains(scalar.value) {
                out += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            } else if scalar == "\"" || scalar == "\\" {
                out += "\\" + String(scalar)
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
