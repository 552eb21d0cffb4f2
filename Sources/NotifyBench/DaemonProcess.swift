#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import NotifyBus
import NotifySystem

/// The daemon's process as a benchmark sees it: found through the socket, measured through `/proc` (Linux).
///
/// The kernel reports the peer of a connected Unix socket (`SO_PEERCRED`): for a client, the process that created
/// the listening socket, which is the daemon unless a service manager created it (socket activation). Then the
/// peer is that manager, and the daemon's CPU time and memory are unknown (``unavailableReason`` says so).
public struct DaemonProcess: Sendable, Hashable {
    /// The daemon's process id, when it is known.
    public var pid: Int32?
    /// The process's name as `/proc/PID/comm` gives it.
    public var name: String?
    /// Why CPU time and memory cannot be read, when they cannot.
    public var unavailableReason: String?

    /// The daemon at the other end of the connected Unix socket `descriptor`.
    static func peer(of descriptor: CInt) -> DaemonProcess {
        guard let pid = peerProcessID(of: descriptor), pid > 0 else {
            return DaemonProcess(unavailableReason: "the kernel did not say which process serves the socket (SO_PEERCRED)")
        }
        guard let comm = ProcFile.read("/proc/\(pid)/comm") else {
            return DaemonProcess(pid: pid, unavailableReason: "/proc/\(pid) cannot be read")
        }
        let name = String(decoding: comm.prefix { $0 != UInt8(ascii: "\n") }, as: UTF8.self)
        if name.hasPrefix("systemd") {
            return DaemonProcess(
                unavailableReason: "the socket was created by \(name) (pid \(pid)) for socket activation, so the daemon's own pid is unknown"
            )
        }
        guard ProcessUsage.read(pid: pid) != nil else {
            return DaemonProcess(pid: pid, name: name, unavailableReason: "/proc/\(pid)/stat or status cannot be read")
        }
        return DaemonProcess(pid: pid, name: name)
    }

    /// Its CPU time and memory now, when they can be read.
    func usage() -> ProcessUsage? {
        guard let pid, unavailableReason == nil else { return nil }
        return ProcessUsage.read(pid: pid)
    }

    private static func peerProcessID(of descriptor: CInt) -> Int32? {
        POSIX.peerCredentials(of: descriptor)?.pid
    }
}

/// A process's CPU time and memory, from `/proc/PID/stat` and `/proc/PID/status`.
public struct ProcessUsage: Sendable, Hashable {
    /// User plus system CPU time of all its threads since it started, in seconds.
    public var cpuSeconds: Double
    /// Its resident set size (`VmRSS`), in KiB.
    public var residentKiB: UInt64

    /// Creates a reading.
    public init(cpuSeconds: Double, residentKiB: UInt64) {
        self.cpuSeconds = cpuSeconds
        self.residentKiB = residentKiB
    }

    /// Reads process `pid`'s usage; nil when `/proc` does not tell.
    public static func read(pid: Int32) -> ProcessUsage? {
        guard let stat = ProcFile.read("/proc/\(pid)/stat"), let ticks = cpuTicks(stat: stat),
            let status = ProcFile.read("/proc/\(pid)/status"), let resident = residentKiB(status: status)
        else { return nil }
        let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))
        return ProcessUsage(cpuSeconds: Double(ticks) / ticksPerSecond, residentKiB: resident)
    }

    /// utime + stime, in clock ticks: fields 14 and 15 of `/proc/PID/stat`, counted after the command name in
    /// parentheses (which may hold spaces and parentheses itself, so the last `)` ends it).
    static func cpuTicks(stat: [UInt8]) -> UInt64? {
        guard let close = stat.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        let fields = stat[(close + 1)...].split(separator: UInt8(ascii: " "))
        // fields[0] is field 3 (the state), so utime (14) and stime (15) are fields[11] and fields[12].
        guard fields.count > 12, let user = decimal(fields[11]), let system = decimal(fields[12]) else { return nil }
        return user + system
    }

    /// The `VmRSS:` line of `/proc/PID/status`, in KiB.
    static func residentKiB(status: [UInt8]) -> UInt64? {
        for line in status.split(separator: UInt8(ascii: "\n")) where line.starts(with: Array("VmRSS:".utf8)) {
            let isDigit = { (byte: UInt8) in byte &- UInt8(ascii: "0") < 10 }
            return decimal(line.dropFirst(6).drop { !isDigit($0) }.prefix(while: isDigit))
        }
        return nil
    }

    private static func decimal(_ digits: ArraySlice<UInt8>) -> UInt64? {
        digits.withUnsafeBytes { LineScanner.unsigned($0, 0..<$0.count) }
    }
}

/// Reads small files such as those in `/proc`.
enum ProcFile {
    /// The first 64 KiB of the file at `path`, or nil when it cannot be read.
    static func read(_ path: String) -> [UInt8]? {
        let descriptor = POSIX.open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { POSIX.close(descriptor) }
        var contents: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while contents.count < 65_536 {
            let count = chunk.withUnsafeMutableBytes { POSIX.read(descriptor, $0.baseAddress!, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { return nil }
            if count == 0 { break }
            contents += chunk[..<count]
        }
        return contents
    }
}
