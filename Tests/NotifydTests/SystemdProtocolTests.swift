import Foundation
import NotifySystem
import Testing

@testable import NotifyDaemon

/// What the daemon says to systemd and reads from it without libsystemd (sd_notify, sd_journal_sendv,
/// sd_listen_fds, sd_watchdog_enabled), each against a socket of the test's own where there is one to listen on.
@Suite("systemd's protocols", .timeLimit(.minutes(3)))
struct SystemdProtocolTests {
    /// A datagram socket bound at a path in a fresh temporary directory, standing in for systemd's.
    final class Listener {
        let directory: String
        let path: String
        let descriptor: Int32

        init() throws {
            directory = try makeTemporaryDirectory()
            path = directory + "/socket"
            descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &address.sun_path) { raw in
                for (index, byte) in path.utf8.enumerated() { raw[index] = byte }
            }
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            try #require(descriptor >= 0 && bound == 0)
            // A receive that waits at most 10 s: a datagram that never comes fails the test instead of hanging it.
            var timeout = timeval(tv_sec: 10, tv_usec: 0)
            setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        }

        deinit {
            close(descriptor)
            try? FileManager.default.removeItem(atPath: directory)
        }

        /// The next datagram's bytes, and the descriptor it carried, if any.
        func receive() -> (bytes: [UInt8], descriptor: Int32?)? {
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            let controlSize = MemoryLayout<cmsghdr>.stride + MemoryLayout<Int32>.stride + 16
            let control = UnsafeMutableRawPointer.allocate(byteCount: controlSize, alignment: 16)
            defer { control.deallocate() }
            let count = buffer.withUnsafeMutableBytes { raw -> Int in
                var vector = iovec(iov_base: raw.baseAddress, iov_len: raw.count)
                return withUnsafeMutablePointer(to: &vector) { vectorPointer in
                    var message = msghdr()
                    message.msg_iov = vectorPointer
                    message.msg_iovlen = 1
                    message.msg_control = control
                    message.msg_controllen = controlSize
                    let received = recvmsg(descriptor, &message, 0)
                    guard received >= 0 else { return -1 }
                    if message.msg_controllen >= MemoryLayout<cmsghdr>.stride {
                        let header = control.assumingMemoryBound(to: cmsghdr.self).pointee
                        if header.cmsg_level == SOL_SOCKET && header.cmsg_type == Int32(SCM_RIGHTS) {
                            passed = (control + MemoryLayout<cmsghdr>.stride).load(as: Int32.self)
                        }
                    }
                    return received
                }
            }
            guard count >= 0 else { return nil }
            return (Array(buffer[..<count]), passed)
        }
        private var passed: Int32?
    }

    @Test("a record is NAME=value lines; a value with a line break goes with its length")
    func record() {
        let record = JournalSocket.record(of: [("MESSAGE", "two\nlines"), ("PRIORITY", "5")])
        var expected = Array("MESSAGE\n".utf8)
        expected += [9, 0, 0, 0, 0, 0, 0, 0]
        expected += Array("two\nlines\nPRIORITY=5\n".utf8)
        #expect(record == expected)
    }

    @Test("a record reaches the journal's socket as one datagram")
    func journalDatagram() throws {
        let journal = try Listener()
        let socket = JournalSocket(path: journal.path)
        #expect(socket.send([("MESSAGE", "hello"), ("TOPIC", "backup.status")]))
        let received = try #require(journal.receive())
        #expect(received.bytes == Array("MESSAGE=hello\nTOPIC=backup.status\n".utf8))
        #expect(received.descriptor == nil)
    }

    @Test("a record too large for a datagram goes as a sealed memfd, as journald expects")
    func journalLargeRecord() throws {
        let journal = try Listener()
        let socket = JournalSocket(path: journal.path)
        let message = String(repeating: "x", count: 4 << 20)
        #expect(socket.send([("MESSAGE", message)]))
        let received = try #require(journal.receive())
        #expect(received.bytes.isEmpty)
        let memory = try #require(received.descriptor)
        defer { close(memory) }
        // F_GET_SEALS (F_ADD_SEALS + 1): every seal, so that journald may map it without fearing it changes.
        #expect(fcntl(memory, JournalSocket.addSeals + 1) == JournalSocket.allSeals)
        var contents = [UInt8](repeating: 0, count: message.utf8.count + 64)
        let count = pread(memory, &contents, contents.count, 0)
        #expect(Array(contents[..<max(count, 0)]) == Array("MESSAGE=\(message)\n".utf8))
    }

    @Test("no journal listening: the record is refused, for the caller to write elsewhere")
    func journalAbsent() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        #expect(!JournalSocket(path: directory + "/none").send([("MESSAGE", "lost?")]))
    }

    @Test("field names are made valid for the journal", arguments: [
        ("topic", "TOPIC"), ("peer-uid", "PEER_UID"), ("_hidden", "HIDDEN"), ("9lives", "F9LIVES"), ("état", "TAT"), ("", "F"),
    ])
    func fieldNames(_ key: String, _ expected: String) {
        let name = JournalSocket.fieldName(key)
        #expect(name == expected)
        #expect(!name.hasPrefix("_") && name.first?.isNumber == false)
        #expect(name.allSatisfy { $0.isUppercase || $0.isNumber || $0 == "_" })
        #expect(JournalSocket.fieldName(String(repeating: "a", count: 100)).count == 64, "the journal's longest name")
    }

    @Test("a state reaches $NOTIFY_SOCKET, a path or an abstract name")
    func notify() throws {
        let manager = try Listener()
        let notifier = ServiceNotifier(socketPath: manager.path)
        #expect(notifier.isPresent)
        #expect(notifier.send("READY=1\nSTATUS=up"))
        #expect(try #require(manager.receive()).bytes == Array("READY=1\nSTATUS=up".utf8))

        #expect(!ServiceNotifier(socketPath: nil).isPresent)
        #expect(!ServiceNotifier(socketPath: "").send("READY=1"))
        #expect(!ServiceNotifier(socketPath: "vsock:2:1234").isPresent, "vsock is not spoken")
        #expect(!ServiceNotifier(socketPath: "/" + String(repeating: "a", count: 200)).isPresent, "longer than a socket path")
        #expect(ServiceNotifier(socketPath: "@notifyd-test-abstract").isPresent)
    }

    @Test("sockets passed by systemd count only for this process, and only as numbers")
    func socketActivation() throws {
        #expect(try SocketActivation.passedCount(listenPID: nil, listenFDs: "1", ownPID: 42) == 0)
        #expect(try SocketActivation.passedCount(listenPID: "42", listenFDs: "1", ownPID: 42) == 1)
        #expect(try SocketActivation.passedCount(listenPID: "41", listenFDs: "1", ownPID: 42) == 0, "another process's")
        #expect(try SocketActivation.passedCount(listenPID: "42", listenFDs: nil, ownPID: 42) == 0)
        #expect(try SocketActivation.passedCount(listenPID: "42", listenFDs: "0", ownPID: 42) == 0)
        #expect(throws: SocketFileError.self) { try SocketActivation.passedCount(listenPID: "x", listenFDs: "1", ownPID: 42) }
        #expect(throws: SocketFileError.self) { try SocketActivation.passedCount(listenPID: "42", listenFDs: "-1", ownPID: 42) }
        #expect(throws: SocketFileError.self) {
            try SocketActivation.passedCount(listenPID: "42", listenFDs: "99999999999999999999", ownPID: 42)
        }
    }

    @Test("the watchdog's interval is read from WATCHDOG_USEC, for this process only")
    func watchdog() {
        #expect(ServiceManager.watchdogInterval(microseconds: "2000000", pid: nil, ownPID: 42) == .seconds(2))
        #expect(ServiceManager.watchdogInterval(microseconds: "2000000", pid: "42", ownPID: 42) == .seconds(2))
        #expect(ServiceManager.watchdogInterval(microseconds: "2000000", pid: "41", ownPID: 42) == nil)
        #expect(ServiceManager.watchdogInterval(microseconds: nil, pid: nil, ownPID: 42) == nil)
        #expect(ServiceManager.watchdogInterval(microseconds: "0", pid: nil, ownPID: 42) == nil)
        #expect(ServiceManager.watchdogInterval(microseconds: "-5", pid: nil, ownPID: 42) == nil)
        #expect(ServiceManager.watchdogInterval(microseconds: "99999999999999999", pid: nil, ownPID: 42) == .seconds(86_400))
    }
}

private func makeTemporaryDirectory() throws -> String {
    var template = Array((NSTemporaryDirectory() + "/notifyd-systemd-XXXXXX").utf8CString)
    let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
    try #require(made != nil)
    return String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
