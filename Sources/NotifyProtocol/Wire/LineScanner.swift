#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Byte-level helpers for the line part of frames: where a line ends, its tokens, its numbers.
///
/// Both decoders parse straight out of the receive buffer with these, so reading a frame costs no allocation
/// beyond the `String` of its topic.
package enum LineScanner {
    package static let lineFeed = UInt8(ascii: "\n")
    package static let carriageReturn = UInt8(ascii: "\r")
    package static let space = UInt8(ascii: " ")
    package static let tab = UInt8(ascii: "\t")
    package static let hash = UInt8(ascii: "#")

    package enum LineSearch: Equatable {
        /// A line whose content is `bytes[start..<contentEnd]` (without `\r\n` or `\n`); the next line starts at `next`.
        case found(contentEnd: Int, next: Int)
        /// No line break yet, and the line could still be short enough.
        case incomplete
        /// The line is longer than allowed (with or without its line break).
        case tooLong
    }

    /// Finds the line that starts at `start`, allowing at most `maxLength` bytes of content before its line break.
    package static func findLine(in bytes: UnsafeRawBufferPointer, from start: Int, maxLength: Int) -> LineSearch {
        // The line break may sit at most maxLength + 1 bytes in (after a `\r`); look no further than that.
        let window = min(bytes.count - start, maxLength + 2)
        guard window > 0, let base = bytes.baseAddress else { return .incomplete }
        guard let found = memchr(base + start, Int32(lineFeed), window) else {
            return window == maxLength + 2 ? .tooLong : .incomplete
        }
        let lineFeedIndex = base.distance(to: UnsafeRawPointer(found))
        var contentEnd = lineFeedIndex
        if contentEnd > start && bytes[contentEnd - 1] == carriageReturn { contentEnd -= 1 }
        if contentEnd - start > maxLength { return .tooLong }
        return .found(contentEnd: contentEnd, next: lineFeedIndex + 1)
    }

    package enum LineBreak: Equatable {
        /// A `\n` (length 1) or `\r\n` (length 2).
        case present(length: Int)
        /// The bytes end before one can tell.
        case needMoreData
        /// Something else is there.
        case absent
    }

    /// What follows a payload at `index`: the line break that must end it, or not.
    package static func lineBreak(in bytes: UnsafeRawBufferPointer, at index: Int) -> LineBreak {
        guard index < bytes.count else { return .needMoreData }
        switch bytes[index] {
        case lineFeed:
            return .present(length: 1)
        case carriageReturn:
            guard index + 1 < bytes.count else { return .needMoreData }
            return bytes[index + 1] == lineFeed ? .present(length: 2) : .absent
        default:
            return .absent
        }
    }

    /// Parses `bytes[range]` as an unsigned decimal number of 1 to 20 digits that fits in 64 bits.
    /// - Parameter saturating: whether 20 digits past `UInt64.max` read as `UInt64.max` instead of nil: a payload
    ///   size that large is still a size, just too large.
    package static func unsigned(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>, saturating: Bool = false) -> UInt64? {
        guard !range.isEmpty, range.count <= 20 else { return nil }
        var value: UInt64 = 0
        if range.count < 20 {
            // 19 digits cannot overflow 64 bits: no check per digit.
            for index in range {
                let digit = bytes[index] &- UInt8(ascii: "0")
                guard digit < 10 else { return nil }
                value = value &* 10 &+ UInt64(digit)
            }
            return value
        }
        var overflowed = false
        for index in range {
            let digit = bytes[index] &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            let (times10, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times10.addingReportingOverflow(UInt64(digit))
            overflowed = overflowed || overflow1 || overflow2
            value = sum
        }
        guard !overflowed else { return saturating ? .max : nil }
        return value
    }

    /// Whether `bytes[range]` spells `word` (given in upper case), ignoring ASCII case.
    package static func equalsIgnoringCase(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>, _ word: StaticString) -> Bool {
        guard range.count == word.utf8CodeUnitCount else { return false }
        let expected = word.utf8Start
        var offset = 0
        for index in range {
            var byte = bytes[index]
            if byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z") { byte -= 0x20 }
            if byte != expected[offset] { return false }
            offset += 1
        }
        return true
    }

    /// Whether `bytes[range]` spells `word` exactly.
    package static func equals(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>, _ word: StaticString) -> Bool {
        guard range.count == word.utf8CodeUnitCount else { return false }
        return memcmp(bytes.baseAddress! + range.lowerBound, word.utf8Start, range.count) == 0
    }

    /// `bytes[range]` as printable text for an error sentence: at most 64 characters, controls escaped.
    package static func quoted(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) -> String {
        let slice = UnsafeRawBufferPointer(rebasing: bytes[range.lowerBound..<min(range.upperBound, range.lowerBound + 64)])
        var text = ""
        for scalar in String(decoding: slice, as: UTF8.self).unicodeScalars {
            if scalar.value < 0x20 || scalar.value == 0x7F {
                text += "\\x" + (scalar.value < 0x10 ? "0" : "") + String(scalar.value, radix: 16)
            } else {
                text.unicodeScalars.append(scalar)
            }
        }
        return "\"" + text + (range.count > 64 ? "…" : "") + "\""
    }
}

/// Walks the space- or tab-separated tokens of one line.
package struct Tokenizer {
    private let bytes: UnsafeRawBufferPointer
    private var position: Int
    private let end: Int

    package init(_ bytes: UnsafeRawBufferPointer, from start: Int, to end: Int) {
        self.bytes = bytes
        self.position = start
        self.end = end
    }

    /// The next token's range, or nil at the end of the line.
    package mutating func next() -> Range<Int>? {
        while position < end && isBlank(bytes[position]) { position += 1 }
        guard position < end else { return nil }
        let start = position
        while position < end && !isBlank(bytes[position]) { position += 1 }
        return start..<position
    }

    /// The next token read as ``LineScanner/unsigned(_:_:saturating:)`` reads one, in the same pass that finds its
    /// end: nil at the end of the line, or when the token is not such a number (it is passed over either way).
    package mutating func nextUnsigned() -> UInt64? {
        while position < end && isBlank(bytes[position]) { position += 1 }
        guard position < end else { return nil }
        let start = position
        var value: UInt64 = 0
        while position < end {
            let byte = bytes[position]
            if isBlank(byte) { break }
            let digit = byte &- UInt8(ascii: "0")
            guard digit < 10 else {
                while position < end && !isBlank(bytes[position]) { position += 1 }
                return nil
            }
            value = value &* 10 &+ UInt64(digit)
            position += 1
        }
        // 19 digits cannot overflow; 20 may, and are read again with the checks.
        return position - start < 20 ? value : LineScanner.unsigned(bytes, start..<position)
    }

    /// Everything after the current position, without leading blanks (for the sentence of an `ERR`).
    package mutating func rest() -> Range<Int> {
        while position < end && isBlank(bytes[position]) { position += 1 }
        defer { position = end }
        return position..<end
    }

    private func isBlank(_ byte: UInt8) -> Bool { byte == LineScanner.space || byte == LineScanner.tab }
}

/// The line that starts every frame, in both directions: `[#<id>] <VERB> <arguments…>`.
package struct FrameLine {
    package enum Parsed {
        /// No line break yet, and the line could still be short enough.
        case needMoreData
        /// The line is longer than allowed.
        case tooLong
        /// A line with nothing on it; the next one starts at `next`.
        case empty(next: Int)
        /// `#…` that is not a number, or a number with no verb after it (then `id` is that number).
        case badID(Range<Int>, id: UInt64?, next: Int)
        case line(FrameLine)
    }

    /// The request id, if the line starts with one.
    package let id: UInt64?
    /// Where the verb is.
    package let verb: Range<Int>
    /// The tokens after the verb.
    package var arguments: Tokenizer
    /// The end of the line's content (before `\r\n` or `\n`).
    package let end: Int
    /// Where what follows the line starts: a payload, or the next frame.
    package let next: Int

    /// Parses the line at the start of `bytes`.
    package static func parse(_ bytes: UnsafeRawBufferPointer, maxLength: Int) -> Parsed {
        let end: Int
        let next: Int
        switch LineScanner.findLine(in: bytes, from: 0, maxLength: maxLength) {
        case .incomplete: return .needMoreData
        case .tooLong: return .tooLong
        case .found(let contentEnd, let nextLine):
            end = contentEnd
            next = nextLine
        }
        var tokens = Tokenizer(bytes, from: 0, to: end)
        guard var verb = tokens.next() else { return .empty(next: next) }
        var id: UInt64?
        if bytes[verb.lowerBound] == LineScanner.hash {
            guard let parsed = LineScanner.unsigned(bytes, verb.lowerBound + 1..<verb.upperBound) else {
                return .badID(verb, id: nil, next: next)
            }
            guard let following = tokens.next() else { return .badID(verb, id: parsed, next: next) }
            id = parsed
            verb = following
        }
        return .line(FrameLine(id: id, verb: verb, arguments: tokens, end: end, next: next))
    }
}
