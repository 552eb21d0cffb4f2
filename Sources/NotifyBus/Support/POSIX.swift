import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The C library calls the library makes directly, named so that methods called `open`, `read` or `close` do not
/// shadow them, and written once for every C library.
enum POSIX {
    static func open(_ path: String, _ flags: CInt, _ mode: mode_t = 0) -> CInt {
        #if canImport(Glibc)
        Glibc.open(path, flags, mode)
        #elseif canImport(Musl)
        Musl.open(path, flags, mode)
        #elseif canImport(Darwin)
        Darwin.open(path, flags, mode)
        #endif
    }

    static func read(_ descriptor: CInt, _ buffer: UnsafeMutableRawPointer, _ count: Int) -> Int {
        #if canImport(Glibc)
        Glibc.read(descriptor, buffer, count)
        #elseif canImport(Musl)
        Musl.read(descriptor, buffer, count)
        #elseif canImport(Darwin)
        Darwin.read(descriptor, buffer, count)
        #endif
    }

    static func write(_ descriptor: CInt, _ buffer: UnsafeRawPointer, _ count: Int) -> Int {
        #if canImport(Glibc)
        Glibc.write(descriptor, buffer, count)
        #elseif canImport(Musl)
        Musl.write(descriptor, buffer, count)
        #elseif canImport(Darwin)
        Darwin.write(descriptor, buffer, count)
        #endif
    }

    /// `send` without SIGPIPE: a peer that went away must give an error, not kill the process.
    static func sendWithoutSignal(_ descriptor: CInt, _ buffer: UnsafeRawPointer, _ count: Int) -> Int {
        #if canImport(Darwin)
        Darwin.send(descriptor, buffer, count, 0)  // Darwin has no MSG_NOSIGNAL; SO_NOSIGPIPE is set instead
        #elseif canImport(Musl)
        Musl.send(descriptor, buffer, count, CInt(MSG_NOSIGNAL))
        #else
        Glibc.send(descriptor, buffer, count, CInt(MSG_NOSIGNAL))
        #endif
    }

    /// Writes all of `buffer` with `write` (or another call of the same shape), retrying when interrupted.
    /// - Returns: nil when everything was written, else the `errno` of the failure.
    static func writeAll(
        _ descriptor: CInt,
        _ buffer: ByteBuffer,
        _ write: (CInt, UnsafeRawPointer, Int) -> Int = POSIX.write
    ) -> CInt? {
        buffer.withUnsafeReadableBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                offset += written
            }
            return nil
        }
    }

    @discardableResult
    static func close(_ descriptor: CInt) -> CInt {
        #if canImport(Glibc)
        Glibc.close(descriptor)
        #elseif canImport(Musl)
        Musl.close(descriptor)
        #elseif canImport(Darwin)
        Darwin.close(descriptor)
        #endif
    }
}
