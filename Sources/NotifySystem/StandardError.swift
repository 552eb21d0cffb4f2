/// A line to standard error, written at once and unbuffered: what a process says before its logging is set up, or
/// beside it (the CLI's errors, a center's undecodable notifications). One writer for every target.
package enum StandardError {
    /// Writes `line` and a line break in one call; a failure is ignored (there is nowhere left to say it).
    package static func writeLine(_ line: String) {
        var text = line + "\n"
        text.withUTF8 { _ = POSIX.writeAll(2, UnsafeRawBufferPointer($0)) }
    }
}
