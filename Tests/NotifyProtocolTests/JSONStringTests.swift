import NIOCore
import Testing

@testable import NotifyProtocol

/// The one JSON string escaper, into each kind of output the project writes JSON to.
@Suite("JSON strings", .timeLimit(.minutes(1)))
struct JSONStringTests {
    @Test("quotes, backslashes and control characters (C0 and DEL) are escaped, the rest kept, alike in every output")
    func escapes() {
        let input = "a\"b\\c\nd\re\tf\u{0}g\u{1F}h\u{7F}i é ✓ 🎉"
        let expected = #""a\"b\\c\nd\re\tf\u0000g\u001fh\u007fi é ✓ 🎉""#
        var bytes: [UInt8] = []
        bytes.appendJSONString(input)
        var buffer = ByteBuffer()
        buffer.appendJSONString(input)
        var text = "x"
        text.appendJSONString(input)
        #expect(String(decoding: bytes, as: UTF8.self) == expected)
        #expect(String(buffer: buffer) == expected)
        #expect(text == "x" + expected)
    }

    @Test("an empty string and one with nothing to escape are written whole")
    func plain() {
        var empty: [UInt8] = []
        empty.appendJSONString("")
        #expect(empty == Array(#""""#.utf8))
        var plain = ""
        plain.appendJSONString("backup.done")
        #expect(plain == #""backup.done""#)
    }
}
