import Testing

@testable import NotifyProtocol

/// The scanning under both decoders: a number read in the pass that finds its token reads as the token does.
@Suite("Line scanning (no socket)", .timeLimit(.minutes(3)))
struct LineScannerTests {
    @Test("nextUnsigned reads each token as unsigned reads it: 0 to UInt64.max, nil past it, for signs, letters and the end")
    func nextUnsignedAgreesWithUnsigned() {
        let tokens = [
            "0", "7", "007", "1234567890123456789", "9999999999999999999", "18446744073709551615",
            "18446744073709551616", "99999999999999999999", "184467440737095516150", "-1", "+1", "1a", "a1", "1.5",
        ]
        let line = Array(("  " + tokens.joined(separator: " \t ") + "  ").utf8)
        line.withUnsafeBytes { bytes in
            var byRange = Tokenizer(bytes, from: 0, to: bytes.count)
            var byNumber = Tokenizer(bytes, from: 0, to: bytes.count)
            for token in tokens {
                let range = byRange.next()!
                #expect(byNumber.nextUnsigned() == LineScanner.unsigned(bytes, range), "\(token)")
            }
            #expect(byNumber.nextUnsigned() == nil && byNumber.next() == nil, "nothing after the last token")
        }
        #expect(LineScanner.unsigned(UnsafeRawBufferPointer(start: nil, count: 0), 0..<0) == nil)
    }
}
