import Testing

@testable import NotifyHTTP

/// The gateway's tokens and its bounds on streams (no socket).
@Suite("The HTTP gateway's tokens and bounds (no socket)", .timeLimit(.minutes(1)))
struct GatewayAccessTests {
    static let reader = "r-0123456789abcdef"
    static let writer = "w-0123456789abcdef"

    @Test("a token file: read-only and read-write lines, comments and blank lines; a token is found whole, never by a prefix or an extension")
    func tokens() throws {
        let table = try TokenTable(parsing: "# tokens\n\nread-only \(Self.reader)\n  read-write\t\(Self.writer)  \n", path: "t")
        #expect(table.permission(of: Self.reader[...]) == .readOnly)
        #expect(table.permission(of: Self.writer[...]) == .readWrite)
        #expect(table.permission(of: Self.reader.dropLast()) == nil)
        #expect(table.permission(of: (Self.reader + "0")[...]) == nil)
        // Lengths that differ by a multiple of 256 too (a comparison of their low byte would take them).
        #expect(table.permission(of: (Self.reader + String(repeating: "A", count: 256))[...]) == nil)
        #expect(table.permission(of: (Self.writer + String(repeating: "\0", count: 512))[...]) == nil)
        #expect(table.permission(of: "") == nil)
    }

    @Test("a token file that cannot be used is refused with its line: an unknown word, a short token, two tokens, none at all")
    func badTokenFiles() {
        for (text, says) in [
            ("admin \(Self.writer)\n", "t:1: a line is `read-only TOKEN` or `read-write TOKEN`"),
            ("# ok\nread-only short\n", "t:2: a token has at least 16 characters"),
            ("read-write \(Self.writer) \(Self.reader)\n", "t:1: one token after read-write"),
            ("# nothing\n", "t holds no token"),
        ] {
            #expect(throws: TokenTable.Problem.self, "\(text)") { try TokenTable(parsing: text, path: "t") }
            do {
                _ = try TokenTable(parsing: text, path: "t")
            } catch {
                #expect("\(error)".hasPrefix(says), "\(error)")
            }
        }
    }

    @Test("streams are bounded per client address and in total, and each one let go of makes room again")
    func streamLimits() throws {
        let limits = StreamLimits(total: 3, perClient: 2)
        try limits.acquire("a")
        try limits.acquire("a")
        #expect(throws: GatewayError.self) { try limits.acquire("a") }
        try limits.acquire("b")
        #expect(throws: GatewayError.self) { try limits.acquire("c") }
        limits.release("a")
        try limits.acquire("c")
        #expect(limits.count == 3)
        limits.release("a")
        limits.release("b")
        limits.release("c")
        #expect(limits.count == 0)
        try limits.acquire("a")
        try limits.acquire("a")
    }
}
