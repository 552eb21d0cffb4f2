package import NIOCore

#if canImport(Glibc)
package import Glibc
#elseif canImport(Musl)
package import Musl
#elseif canImport(Darwin)
package import Darwin
#endif

/// The C library calls the library makes directly, named so that methods called `open`, `read` or `close` do not
/// shadow them, and written once for every C library.
package enum POSIX {
    package static func open(_ path: String, _ flags: CInt) -> CInt {
        open(path, flags, 0)
    }

    package static func open(_ path: String, _ flags: CInt, _ mode: mode_t) -> CInt {
        #if canImport(Glibc)
        Glibc.open(path, flags, mode)
        #elseif canImport(Musl)
        Musl.open(path, flags, mode)
        #elseif canImport(Darwin)
        Darwin.open(path, flags, mode)
        #endif
    }

    package static func read(_ descriptor: CInt, _ buffer: UnsafeMutableRawPointer, _ count: Int) -> Int {
        #if canImport(Glibc)
        Glibc.read(descriptor, buffer, count)
        #elseif canImport(Musl)
        Musl.read(descriptor, buffer, count)
        #elseif canImport(Darwin)
        Darwin.read(descriptor, buffer, count)
        #endif
    }

    package static func write(_ descriptor: CInt, _ buffer: UnsafeRawPointer, _ count: Int) -> Int {
        #if canImport(Glibc)
        Glibc.write(descriptor, buffer, count)
        #elseif canImport(Musl)
        Musl.write(descriptor, buffer, count)
        #elseif canImport(Darwin)
        Darwin.write(descriptor, buffer, count)
        #endif
    }

    /// `send` without SIGPIPE: a peer that went away must give an error, not kill the process.
    package static func sendWithoutSignal(_ descriptor: CInt, _ buffer: UnsafeRawPointer, _ count: Int) -> Int {
        #if canImport(Darwin)
        Darwin.send(descriptor, buffer, count, 0)  // Darwin has no MSG_NOSIGNAL: `unixStreamSocket` sets SO_NOSIGPIPE
        #elseif canImport(Musl)
        Musl.send(descriptor, buffer, count, CInt(MSG_NOSIGNAL))
        #else
        Glibc.send(descriptor, buffer, count, CInt(MSG_NOSIGNAL))
        #endif
    }

    /// A new Unix stream socket that is closed on exec and never raises SIGPIPE, the way each C library spells it.
    /// - Returns: the descriptor, or -1 with `errno` set.
    package static func unixStreamSocket() -> CInt {
        #if canImport(Darwin)
        // Darwin has neither SOCK_CLOEXEC nor MSG_NOSIGNAL: both are set on the descriptor instead.
        let descriptor = Darwin.socket(AF_UNIX, SOCK_STREAM, 0)
        guard descriptor >= 0 else { return descriptor }
        _ = Darwin.fcntl(descriptor, F_SETFD, FD_CLOEXEC)
        var on: CInt = 1
        _ = Darwin.setsockopt(descriptor, SOL_SOCKET, SO_NOSIGPIPE, &on, socklen_t(MemoryLayout<CInt>.size))
        return descriptor
        #elseif canImport(Musl)
        return Musl.socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)
        #else
        return Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #endif
    }

    /// A new Unix datagram socket that is closed on exec: what systemd's notification and journal sockets take.
    /// - Returns: the descriptor, or -1 with `errno` set.
    package static func unixDatagramSocket() -> CInt {
        #if canImport(Darwin)
        let descriptor = Darwin.socket(AF_UNIX, SOCK_DGRAM, 0)
        if descriptor >= 0 { _ = Darwin.fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
        return descriptor
        #elseif canImport(Musl)
        return Musl.socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)
        #else
        return Glibc.socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #endif
    }

    /// The process at the other end of a connected Unix socket, as the kernel recorded it at connect time
    /// (`SO_PEERCRED`), or nil where that cannot be read.
    package static func peerCredentials(of descriptor: CInt) -> KernelCredentials? {
        #if os(Linux)
        var credentials = KernelCredentials()
        var length = socklen_t(MemoryLayout<KernelCredentials>.size)
        guard getsockopt(descriptor, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0 else { return nil }
        return credentials
        #else
        return nil
        #endif
    }

    /// Writes all of `buffer` with `write` (or another call of the same shape), retrying when interrupted.
    /// - Returns: nil when everything was written, else the `errno` of the failure.
    package static func writeAll(
        _ descriptor: CInt,
        _ buffer: ByteBuffer,
        _ write: (CInt, UnsafeRawPointer, Int) -> Int = POSIX.write
    ) -> CInt? {
        buffer.withUnsafeReadableBytes { writeAll(descriptor, $0, write) }
    }

    /// Writes all of `bytes` with `write`, retrying when interrupted.
    /// - Returns: nil when everything was written, else the `errno` of the failure (EPIPE included: SwiftNIO
    ///   ignores SIGPIPE).
    package static func writeAll(
        _ descriptor: CInt,
        _ bytes: UnsafeRawBufferPointer,
        _ write: (CInt, UnsafeRawPointer, Int) -> Int = POSIX.write
    ) -> CInt? {
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

    /// Gives the free pages of every heap arena back to the system: glibc's `malloc_trim(0)`, looked up at run time
    /// (Swift's Glibc module leaves out `<malloc.h>`); nothing under another C library.
    package static func trimHeap() {
        _ = mallocTrim?(0)
    }

    /// Sets, with glibc's `mallopt` (looked up at run time), the trim threshold (the free bytes the top of a heap
    /// keeps before they are given back), the mmap threshold (the smallest block given a mapping of its own, which
    /// glibc otherwise raises as large blocks are freed, and stops raising once the trim threshold is set) and the
    /// most heaps (arenas) threads allocate from.
    /// - Returns: whether all were set (false under another C library).
    @discardableResult
    package static func setHeapLimits(trimThreshold: Int32, mmapThreshold: Int32, arenas: Int32) -> Bool {
        guard let mallopt else { return false }
        // M_TRIM_THRESHOLD, M_MMAP_THRESHOLD and M_ARENA_MAX in glibc's <malloc.h>.
        return mallopt(-1, trimThreshold) == 1 && mallopt(-3, mmapThreshold) == 1 && mallopt(-8, arenas) == 1
    }

    private static let mallopt: (@convention(c) (Int32, Int32) -> Int32)? = {
        guard let symbol = dlsym(nil, "mallopt") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (Int32, Int32) -> Int32).self)
    }()

    private static let mallocTrim: (@convention(c) (Int) -> Int32)? = {
        guard let symbol = dlsym(nil, "malloc_trim") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (Int) -> Int32).self)
    }()

    /// The value of an environment variable of this process, if it is set.
    package static func environmentValue(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }

    @discardableResult
    package static func close(_ descriptor: CInt) -> CInt {
        #if canImport(Glibc)
        Glibc.close(descriptor)
        #elseif canImport(Musl)
        Musl.close(descriptor)
        #elseif canImport(Darwin)
        Darwin.close(descriptor)
        #endif
    }
}

/// Linux's `struct ucred`, which Swift's Glibc module does not import (it is guarded by `_GNU_SOURCE`).
package struct KernelCredentials: Sendable {
    package var pid: Int32 = 0
    package var uid: UInt32 = 0
    package var gid: UInt32 = 0
}
