import Testing

@testable import NotifyProtocol

/// What the daemon's decoder hands on for every frame it reads stays the size of a publish: a rare request with a
/// large payload (an `IMPORT` with its provenance, the fleet's counters) is boxed. Unboxed, an `IMPORT` made every
/// `Request`, `DecodedFrame` and parser step twice the size (113 and 144 bytes), each copied per frame on the
/// publish path, and the daemon's 1 → 1 throughput fell to 0.7 of what it was (issue 51,
/// Benchmarks/Results/throughput-2026-12-07.md).
@Suite("Decoded frames stay small")
struct DecodedSizeTests {
    @Test("a request, a decoded frame and a parser step are at most a publish's size and a little more")
    func decodedValuesStaySmall() {
        let publish = MemoryLayout<PublishFrame>.size
        #expect(MemoryLayout<Request>.size <= 64, "Request: \(MemoryLayout<Request>.size) bytes")
        #expect(MemoryLayout<DecodedFrame>.size <= 64, "DecodedFrame: \(MemoryLayout<DecodedFrame>.size) bytes")
        #expect(MemoryLayout<DecodedFrame>.size <= publish + 8, "DecodedFrame against PublishFrame's \(publish)")
        #expect(MemoryLayout<RequestParser.Step>.size <= 80, "a parser step: \(MemoryLayout<RequestParser.Step>.size) bytes")
    }
}
