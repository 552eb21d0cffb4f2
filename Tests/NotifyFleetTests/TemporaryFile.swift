import Foundation

/// A file holding `text` in the temporary directory, removed when let go of.
final class TemporaryFile {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("notifyd-fleet-\(UUID().uuidString).conf").path
    init(_ text: String) { _ = FileManager.default.createFile(atPath: path, contents: Data(text.utf8)) }
    deinit { try? FileManager.default.removeItem(atPath: path) }
}
