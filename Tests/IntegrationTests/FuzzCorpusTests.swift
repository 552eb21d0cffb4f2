import Foundation
import Testing

/// The fuzzers' seed corpora, replayed by the plain build of each fuzz target (issue 50): an input that once found a
/// crash, kept in `Fuzz/corpus`, must not crash again, and `script/fuzz` is not what catches it.
@Suite("The fuzzers' seed corpora replay without a crash", .timeLimit(.minutes(2)))
struct FuzzCorpusTests {
    @Test("each file of a corpus goes through its target's code as the fuzzer's input, and none crashes it", arguments: [
        ("notifyd-request-fuzz", "request-decoder"), ("notifyd-import-fuzz", "import"),
    ])
    func replay(target: String, corpus: String) async throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let directory = root.appendingPathComponent("Fuzz/corpus/\(corpus)")
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted().map { directory.appendingPathComponent($0).path }
        #expect(files.count >= 5, "the \(corpus) corpus has \(files.count) files")
        let replayer = try ChildProcess(Binaries.directory + "/" + target, files)
        let status = try await replayer.exitStatus(timeout: .seconds(60))
        #expect(status == 0, "\(target) on Fuzz/corpus/\(corpus): exit \(status): \(replayer.standardError.text.suffix(2_000))")
    }
}
