#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

#if FUZZING
/// libFuzzer's driver, from the runtime `-sanitize=fuzzer` links (declared here, as no module exports it).
@_silgen_name("LLVMFuzzerRunDriver")
private func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt
#endif

/// The `main` of a fuzz target. Built with `-D FUZZING` (and `-sanitize=fuzzer`, as `script/fuzz` does), it hands
/// the command line to libFuzzer, which calls `callback` with each input. Built plainly (as `swift build` does), it
/// is a replayer: each file named on the command line goes through `run`, to reproduce a crash the fuzzer saved.
public enum FuzzDriver {
    public static func main(
        callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt,
        replay run: (UnsafeRawBufferPointer) -> Void
    ) {
        #if FUZZING
        var argc = CommandLine.argc
        var argv = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv, callback))
        #else
        for path in CommandLine.arguments.dropFirst() {
            guard let file = fopen(path, "rb") else {
                print("cannot open \(path)")
                continue
            }
            var input: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = fread(&chunk, 1, chunk.count, file)
                if count <= 0 { break }
                input += chunk[..<count]
            }
            fclose(file)
            input.withUnsafeBytes { run($0) }
            print("\(path): \(input.count) bytes, no crash")
        }
        #endif
    }
}
