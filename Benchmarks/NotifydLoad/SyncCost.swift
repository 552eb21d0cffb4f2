import ArgumentParser
import Foundation
import NIOCore
import NotifyBus

/// What `sync = always` costs against the default `sync = never`, for acknowledged retained publishes.
struct SyncCost: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync-cost",
        abstract: "The cost of sync=always (an fsync per batch) against sync=never, for acknowledged retained publishes.",
        discussion: """
            For each policy, on a daemon of its own whose state directory is in --directory (the disk measured): \
            --messages acknowledged retained publishes one at a time (each its own batch, so each its own fsync \
            under sync=always), then the same number pipelined (many per batch). Prints the median time per \
            acknowledged publish and the pipelined rate, per policy, over --runs runs.
            """
    )

    @Option(help: "Publishes per measurement.") var messages = 2_000
    @Option(help: "Runs per policy (median reported).") var runs = 3
    @Option(help: "Where the daemons keep their state: the file system whose fsync is measured.") var directory = "/var/tmp"

    func run() throws {
        print("sync-cost: \(messages) acknowledged retained 16 B publishes, state in \(directory), \(runs) runs per policy")
        var results: [String: (oneAtATime: [Double], pipelined: [Double])] = [:]
        for round in 0..<runs {
            for policy in round % 2 == 0 ? ["never", "always"] : ["always", "never"] {
                var template = Array("\(directory)/notifyd-sync-XXXXXX".utf8CString)
                guard let made = mkdtemp(&template) else { throw LoadError("mkdtemp in \(directory) failed") }
                let stateDirectory = String(cString: made)
                defer { try? FileManager.default.removeItem(atPath: stateDirectory) }
                let daemon = try DaemonProcess(arguments: ["--sync", policy, "--state-dir", stateDirectory])
                defer { daemon.stop() }

                let connection = try NotifyConnection(to: daemon.socketPath)
                let payload = ByteBuffer(string: String(repeating: "s", count: 16))
                let start = ContinuousClock.now
                for index in 0..<messages {
                    try connection.publishAcknowledged(payload, to: Topic("sync.t\(index % 100)"))
                }
                let each = seconds(ContinuousClock.now - start) / Double(messages) * 1e6

                let publisher = try RawConnection(path: daemon.socketPath)
                var frames: [UInt8] = []
                for index in 0..<messages { frames += Array("#\(index) PUB sync.p\(index % 100) 16 ack\nssssssssssssssss\n".utf8) }
                let pipelinedStart = ContinuousClock.now
                let allFrames = frames
                let sender = Thread { try? publisher.send(allFrames) }
                sender.start()
                guard publisher.read(untilLine: "#\(messages - 1) OK \(messages / 100)") else { throw LoadError("the publisher's connection ended") }
                let pipelined = Double(messages) / seconds(ContinuousClock.now - pipelinedStart)
                print("  run \(round + 1) sync=\(policy): \(String(format: "%.1f", each)) µs per acknowledged publish one at a time, \(rate(pipelined)) msg/s pipelined")
                results[policy, default: ([], [])].oneAtATime.append(each)
                results[policy, default: ([], [])].pipelined.append(pipelined)
            }
        }
        for policy in ["never", "always"] {
            let result = results[policy]!
            print("sync=\(policy): median \(String(format: "%.1f", median(result.oneAtATime))) µs per acknowledged publish one at a time, \(rate(median(result.pipelined))) msg/s pipelined")
        }
        let ratio = median(results["always"]!.oneAtATime) / median(results["never"]!.oneAtATime)
        print("sync=always costs \(String(format: "%.1f", ratio))× the time of sync=never per acknowledged publish one at a time")
    }
}
