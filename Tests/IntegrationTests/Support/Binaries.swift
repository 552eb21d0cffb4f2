import Foundation

/// Where the built `notifyd` and `notify` are: next to the test bundle (`swift build` puts every product in one
/// directory), or in `$NOTIFYD_TEST_BINARIES` to test other builds (a release build, an installed package).
enum Binaries {
    static let directory: String = {
        if let override = ProcessInfo.processInfo.environment["NOTIFYD_TEST_BINARIES"], !override.isEmpty {
            return override
        }
        var path = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        // The bundle may be a directory (.xctest) inside the products directory.
        while !FileManager.default.fileExists(atPath: path.appendingPathComponent("notifyd").path), path.path != "/" {
            path.deleteLastPathComponent()
        }
        return path.path
    }()

    static var notifyd: String { directory + "/notifyd" }
    static var notify: String { directory + "/notify" }
    static var notifydHTTP: String { directory + "/notifyd-http" }
    static var notifydFleet: String { directory + "/notifyd-fleet" }

    static func checkBuilt() throws {
        for binary in [notifyd, notify] where !FileManager.default.isExecutableFile(atPath: binary) {
            throw TestFailure("\(binary) is not built; run `swift build` first (script/test does)")
        }
    }
}

/// A fresh directory under the system's temporary directory, removed when the test is done with it.
final class TemporaryDirectory: Sendable {
    let path: String

    init() throws {
        // Short: a Unix socket path must fit in 108 bytes.
        let template = "/tmp/nd-XXXXXX"
        var bytes = Array(template.utf8CString)
        guard let made = mkdtemp(&bytes) else { throw TestFailure("mkdtemp failed") }
        path = String(cString: made)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }
}
