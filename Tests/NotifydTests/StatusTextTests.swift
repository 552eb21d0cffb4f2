import Testing

@testable import NotifyDaemon

@Suite("STATUS= text", .timeLimit(.minutes(3)))
struct StatusTextTests {
    @Test("rates: whole numbers from 10 up, one decimal below, so a slow trickle does not read as 0")
    func rates() {
        #expect(StatusReporter.rate(0) == "0")
        #expect(StatusReporter.rate(0.04) == "0")
        #expect(StatusReporter.rate(0.5) == "0.5")
        #expect(StatusReporter.rate(1) == "1")
        #expect(StatusReporter.rate(2.26) == "2.3")
        #expect(StatusReporter.rate(9.94) == "9.9")
        #expect(StatusReporter.rate(9.96) == "10")
        #expect(StatusReporter.rate(1_234_567.4) == "1234567")
    }
}
