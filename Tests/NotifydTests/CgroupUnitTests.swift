import Foundation
import Testing

@testable import NotifyDaemon

/// The unit of a process, read from its control group without libsystemd: held to systemd's own cases for
/// `cg_path_get_unit` (src/test/test-cgroup-util.c), since a `unit:` access rule rests on it.
@Suite("Unit from a control group", .timeLimit(.minutes(3)))
struct CgroupUnitTests {
    @Test("a group's path names the first unit below its slices", arguments: [
        ("/system.slice/foobar.service/sdfdsaf", "foobar.service"),
        ("/system.slice/getty@tty5.service", "getty@tty5.service"),
        ("/system.slice/getty@tty5.service/aaa/bbb", "getty@tty5.service"),
        ("/system.slice/getty@tty5.service/", "getty@tty5.service"),
        ("/system.slice/getty@tty6.service/tty5", "getty@tty6.service"),
        ("/system.slice/system-waldo.slice/foobar.service/sdfdsaf", "foobar.service"),
        ("/system.slice/system-waldo.slice/_cpu.service/sdfdsaf", "cpu.service"),
        ("/user.slice/user-1000.slice/user@1000.service/server.service", "user@1000.service"),
        ("/user.slice/user-1000.slice/session-3.scope", "session-3.scope"),
        ("/init.scope", "init.scope"),
        ("//system.slice//backup.service", "backup.service"),
    ])
    func units(_ path: String, _ unit: String) {
        #expect(CgroupUnit.unit(ofPath: path) == unit)
    }

    @Test("a path that names no unit gives none", arguments: [
        "sadfdsafsda",
        "/system.slice/getty####@tty6.service/xxx",
        "/user.slice/user-1000.slice/user@.service/server.service",
        "/system.slice",
        "/user.slice/user-1000.slice",
        "/",
        "",
        "/@foo.service",
        "/foo.unknowntype",
        "/.service",
        "/foo@bar.slice",
        "/système.service",
        "/" + String(repeating: "a", count: 250) + ".service",
    ])
    func noUnit(_ path: String) {
        #expect(CgroupUnit.unit(ofPath: path) == nil)
    }

    @Test("the path comes from systemd's hierarchy: name=systemd where there is one, else the unified one")
    func hierarchies() {
        #expect(CgroupUnit.path(inCgroupFile: "0::/system.slice/backup.service\n") == "/system.slice/backup.service")
        let hybrid = "12:cpu,cpuacct:/other\n1:name=systemd:/system.slice/a.service\n0::/system.slice/b.service\n"
        #expect(CgroupUnit.path(inCgroupFile: hybrid) == "/system.slice/a.service")
        #expect(CgroupUnit.path(inCgroupFile: "0::/odd:name/x.service\n") == "/odd:name/x.service", "a path may hold colons")
        #expect(CgroupUnit.path(inCgroupFile: "3:memory:/x\n") == nil)
        #expect(CgroupUnit.path(inCgroupFile: "garbage") == nil)
        #expect(CgroupUnit.path(inCgroupFile: nil) == nil)
    }

    @Test("paths are read below the root systemd runs under, as PID 1's group says")
    func root() {
        #expect(CgroupUnit.rootPath(ofInitPath: "/init.scope") == "/")
        #expect(CgroupUnit.rootPath(ofInitPath: "/machine.slice/machine-c.scope/payload/init.scope")
            == "/machine.slice/machine-c.scope/payload")
        #expect(CgroupUnit.rootPath(ofInitPath: "/") == "/")
        let root = "/machine.slice/machine-c.scope/payload"
        #expect(CgroupUnit.shifted(root + "/system.slice/a.service", below: root) == "/system.slice/a.service")
        #expect(CgroupUnit.shifted(root + "x/system.slice/a.service", below: root) == root + "x/system.slice/a.service",
            "only whole components")
        #expect(CgroupUnit.shifted("/system.slice/a.service", below: "/") == "/system.slice/a.service")
    }

    @Test("this process's own group is read from /proc")
    func ownProcess() throws {
        // Whatever unit the test runs in (none, in a container), the lookup agrees with reading the file by hand.
        let contents = try String(contentsOfFile: "/proc/self/cgroup", encoding: .utf8)
        let init1 = (try? String(contentsOfFile: "/proc/1/cgroup", encoding: .utf8)).flatMap(CgroupUnit.path(inCgroupFile:))
        let expected = CgroupUnit.path(inCgroupFile: contents).flatMap {
            CgroupUnit.unit(ofPath: CgroupUnit.shifted($0, below: init1.map(CgroupUnit.rootPath(ofInitPath:)) ?? "/"))
        }
        #expect(CgroupUnit.unit(ofProcess: getpid()) == expected)
        #expect(CgroupUnit.unit(ofProcess: 0) == nil && CgroupUnit.unit(ofProcess: -1) == nil)
    }
}
