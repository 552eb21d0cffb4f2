/// The grammar of topic names and patterns, checked on raw bytes so the protocol decoder needs no `String` to
/// reject bad input.
///
/// A name is 1 to `maxLength` bytes of UTF-8, made of tokens separated by single dots. No token is empty; no byte is
/// whitespace or a control character. In patterns, a token may be `*` (exactly one token) or, as the last token,
/// `>` (one or more tokens). `*` and `>` appear nowhere else, in patterns or names.
@usableFromInline
package enum TopicSyntax {
    /// The default and protocol maximum length of a name, in bytes.
    package static let defaultMaxLength = 255

    package enum Kind {
        /// A name one can publish to: no wildcards.
        case topic
        /// A name one can subscribe to: wildcards allowed.
        case pattern
    }

    /// The tokens of a name, split at each `.` byte.
    ///
    /// Not `String.split(separator: ".")`: that splits at `.` characters, and a `.` followed by a combining mark
    /// (`"a.\u{301}b"`) is one character with it, so no split would happen there, while the checks of this type and
    /// the index's matching walk split at every `.` byte. Names are bytes on the wire; so are their tokens.
    @usableFromInline
    package static func tokens(of name: String) -> [Substring] {
        name.utf8.split(separator: dot, omittingEmptySubsequences: false).map { Substring($0) }
    }

    @usableFromInline package static let dot = UInt8(ascii: ".")
    private static let star = UInt8(ascii: "*")
    private static let greater = UInt8(ascii: ">")

    /// Returns the first rule `bytes` breaks, or nil when they form a valid name of `kind`.
    package static func violation(in bytes: UnsafeRawBufferPointer, kind: Kind, maxLength: Int) -> TopicError.Reason? {
        let count = bytes.count
        if count == 0 { return .empty }
        if count > maxLength { return .tooLong(byteCount: count, limit: maxLength) }

        var tokenStart = 0
        var asciiOnly = true
        var index = 0
        while index < count {
            let byte = bytes[index]
            if byte >= 0x80 {
                asciiOnly = false
            } else if byte <= 0x20 || byte == 0x7F {
                return .forbiddenCharacter(Unicode.Scalar(byte))
            } else if byte == dot {
                if index == tokenStart { return .emptyToken }
                tokenStart = index + 1
            } else if byte == star || byte == greater {
                if kind == .topic { return .wildcardInTopic }
                let standsAlone = index == tokenStart && (index + 1 == count || bytes[index + 1] == dot)
                if !standsAlone { return .wildcardInsideToken }
                if byte == greater && index + 1 != count { return .fullWildcardNotLast }
            }
            index += 1
        }
        if tokenStart == count { return .emptyToken }
        return asciiOnly ? nil : nonASCIIViolation(in: bytes)
    }

    /// The slow path for names with non-ASCII bytes: full UTF-8 validation and Unicode whitespace and controls.
    private static func nonASCIIViolation(in bytes: UnsafeRawBufferPointer) -> TopicError.Reason? {
        guard let string = String(validating: bytes, as: UTF8.self) else { return .invalidUTF8 }
        for scalar in string.unicodeScalars where scalar.value >= 0x80 {
            if scalar.properties.isWhitespace || scalar.properties.generalCategory == .control {
                return .forbiddenCharacter(scalar)
            }
        }
        return nil
    }

    /// Checks `text` and returns it as a validated name, or throws what is wrong.
    package static func validate(_ text: String, kind: Kind, maxLength: Int) throws(TopicError) {
        var text = text
        let violation = text.withUTF8 { utf8 in
            TopicSyntax.violation(in: UnsafeRawBufferPointer(utf8), kind: kind, maxLength: maxLength)
        }
        if let violation { throw TopicError(violation, input: text.utf8) }
    }

    /// Checks raw bytes (from the wire) and makes a `String` of them only when they are valid.
    package static func string(
        from bytes: UnsafeRawBufferPointer,
        kind: Kind,
        maxLength: Int
    ) -> Result<String, TopicError> {
        if let violation = violation(in: bytes, kind: kind, maxLength: maxLength) {
            return .failure(TopicError(violation, input: bytes))
        }
        return .success(String(decoding: bytes, as: UTF8.self))
    }
}
