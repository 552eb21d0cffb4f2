#if os(Linux)
import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Writes records to the systemd journal through its own socket, in the journal's native protocol
/// (<https://systemd.io/JOURNAL_NATIVE_PROTOCOL/>), as `sd_journal_sendv` does: so that neither the daemon nor the
/// fleet service links libsystemd (with what it links, some 0.9 MiB of every idle daemon's memory).
///
/// A record is one datagram of `NAME=value` lines; a record too large for a datagram goes as a sealed memfd passed
/// with an empty one, as journald expects. Shared by every log handler of the process; the socket is never
/// connected, so that a journald restart does not leave it pointing nowhere.
package final class JournalSocket: Sendable {
    /// The socket of the process, made at first use.
    package static let shared = JournalSocket(path: "/run/systemd/journal/socket")

    private let descriptor: CInt
    /// Where the journal listens; nil for a path too long to be a socket address (then nothing is sent).
    private let address: SocketAddress?

    /// A socket that sends to the journal listening at `path` (tests give one of their own).
    package init(path: String) {
        address = try? SocketAddress(unixDomainSocketPath: path)
        descriptor = address == nil ? -1 : POSIX.unixDatagramSocket()
    }

    deinit {
        if descriptor >= 0 { close(descriptor) }
    }

    /// Sends one record of `fields` (each a name and its value; names as ``fieldName(_:)`` makes them).
    /// - Returns: whether the journal took it; when not, the caller writes the record elsewhere (standard error).
    package func send(_ fields: [(name: String, value: String)]) -> Bool {
        guard descriptor >= 0, let address else { return false }
        let record = JournalSocket.record(of: fields)
        let sent = record.withUnsafeBytes { bytes in
            address.withSockAddr { sendto(descriptor, bytes.baseAddress, bytes.count, CInt(MSG_NOSIGNAL), $0, socklen_t($1)) }
        }
        if sent == record.count { return true }
        // Too large for a datagram (journald's socket allows some 200 KiB): the record in a memfd, sealed so that
        // journald may map it without fearing it changes.
        guard sent < 0, errno == EMSGSIZE else { return false }
        return sendSealedCopy(of: record, to: address)
    }

    /// The bytes of a record: `NAME=value\n` for each field, or, for a value with a line break in it,
    /// `NAME\n`, its length as 64-bit little-endian, the value and `\n`.
    package static func record(of fields: [(name: String, value: String)]) -> [UInt8] {
        var record: [UInt8] = []
        for (name, value) in fields {
            record += name.utf8
            if value.utf8.contains(UInt8(ascii: "\n")) {
                record.append(UInt8(ascii: "\n"))
                withUnsafeBytes(of: UInt64(value.utf8.count).littleEndian) { record += $0 }
            } else {
                record.append(UInt8(ascii: "="))
            }
            record += value.utf8
            record.append(UInt8(ascii: "\n"))
        }
        return record
    }

    /// A field name the journal accepts, made from any key: upper case, with anything but letters, digits and `_`
    /// turned into `_`, never starting with `_` (the journal's own fields) or a digit, at most 64 bytes.
    package static func fieldName(_ key: String) -> String {
        var bytes = key.utf8.map { byte -> UInt8 in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"): byte - 32
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"): byte
            default: UInt8(ascii: "_")
            }
        }
        while bytes.first == UInt8(ascii: "_") { bytes.removeFirst() }
        if bytes.first.map({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) ?? true { bytes.insert(UInt8(ascii: "F"), at: 0) }
        return String(decoding: bytes.prefix(64), as: UTF8.self)
    }

    /// Whether standard error is connected to the journal, as systemd says through `$JOURNAL_STREAM` (the
    /// `<device>:<inode>` of the stream it set up); a terminal or a redirect to a file is not.
    package static func standardErrorIsJournal() -> Bool {
        guard let stream = POSIX.environmentValue("JOURNAL_STREAM") else { return false }
        let parts = stream.split(separator: ":")
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return false }
        var info = stat()
        guard fstat(2, &info) == 0 else { return false }
        return UInt64(info.st_dev) == device && UInt64(info.st_ino) == inode
    }

    private func sendSealedCopy(of record: [UInt8], to address: SocketAddress) -> Bool {
        guard let memfdCreate = JournalSocket.memfdCreate else { return false }
        let memory = memfdCreate("journal-record", JournalSocket.memfdFlags)
        guard memory >= 0 else { return false }
        defer { close(memory) }
        let failure = record.withUnsafeBytes { POSIX.writeAll(memory, $0) }
        guard failure == nil, fcntl(memory, JournalSocket.addSeals, JournalSocket.allSeals) == 0 else {
            return false
        }
        // An empty datagram that carries the descriptor (SCM_RIGHTS).
        let controlSize = MemoryLayout<cmsghdr>.stride + MemoryLayout<CInt>.stride
        let control = UnsafeMutableRawPointer.allocate(byteCount: controlSize, alignment: MemoryLayout<cmsghdr>.alignment)
        defer { control.deallocate() }
        control.initializeMemory(as: UInt8.self, repeating: 0, count: controlSize)
        let header = control.assumingMemoryBound(to: cmsghdr.self)
        header.pointee.cmsg_len = controlSize
        header.pointee.cmsg_level = SOL_SOCKET
        header.pointee.cmsg_type = CInt(SCM_RIGHTS)
        (control + MemoryLayout<cmsghdr>.stride).storeBytes(of: memory, as: CInt.self)
        return address.withSockAddr { name, length in
            var message = msghdr()
            message.msg_name = UnsafeMutableRawPointer(mutating: name)
            message.msg_namelen = socklen_t(length)
            message.msg_control = control
            message.msg_controllen = controlSize
            return sendmsg(descriptor, &message, CInt(MSG_NOSIGNAL))
        } >= 0
    }

    // What Swift's Glibc module leaves out (<linux/memfd.h>, <linux/fcntl.h>, and memfd_create itself, which glibc
    // declares only for _GNU_SOURCE): MFD_CLOEXEC | MFD_ALLOW_SEALING; F_ADD_SEALS; F_SEAL_SEAL, _SHRINK, _GROW and
    // _WRITE.
    private static let memfdFlags: CUnsignedInt = 0x1 | 0x2
    package static let addSeals: CInt = 1024 + 9
    package static let allSeals: CInt = 0x1 | 0x2 | 0x4 | 0x8

    private static let memfdCreate: (@convention(c) (UnsafePointer<CChar>, CUnsignedInt) -> CInt)? = {
        guard let symbol = dlsym(nil, "memfd_create") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (UnsafePointer<CChar>, CUnsignedInt) -> CInt).self)
    }()

}
#endif
