import Foundation
import NIOCore
import NotifyBus
import NotifyBroker
import NotifySystem

/// The broker's share of what an idle subscribed connection costs (the daemon's whole cost per connection is
/// `Benchmarks/IdleConnections/run.sh`; the rest is NIO's channel and the handler): anonymous RSS, as that script
/// measures the daemon's, before and after opening sessions that each subscribe to a topic of their own, without
/// sockets. (glibc's `mallinfo2` would be exact, but Swift's Glibc module leaves out `<malloc.h>`.)
func sessionMemoryBenchmarks(_ harness: inout Harness) {
    guard harness.filter.map({ "session memory".contains($0) }) ?? true else { return }
    print("\n== Broker: heap per idle subscribed session (no socket) ==")
    let count = 10_000
    for (label, subscribes) in [("session only", false), ("session + SUB of a topic of its own", true)] {
        var figures: [Double] = []
        for _ in 0..<harness.runs {
            let broker = Broker()
            let transport = DiscardingTransport()
            // The first session makes what is made once (the uid's account, tables' first storage).
            _ = broker.open(peer: PeerCredentials(pid: 1, uid: 1000, gid: 1000, groups: []), transport: transport)
            var sessions: [Session] = []
            sessions.reserveCapacity(count)
            // What earlier runs freed would otherwise be reused without a page more.
            POSIX.trimHeap()
            let before = anonymousBytes()
            for index in 0..<count {
                let session = broker.open(peer: PeerCredentials(pid: 2, uid: 1000, gid: 1000, groups: []), transport: transport)
                if subscribes {
                    var request = ByteBuffer(string: "SUB idle.t\(index)\n")
                    var decoder = RequestDecoder()
                    while let decoded = decoder.decode(buffer: &request) { broker.handle(decoded, from: session) }
                }
                sessions.append(session)
            }
            broker.flush()
            figures.append(Double(anonymousBytes() - before) / Double(count))
            withExtendedLifetime(sessions) {}
        }
        figures.sort()
        print("\(label.padding(to: 40)) \(Int(figures[figures.count / 2])) B per session (median of \(figures.count))")
    }
}

/// This process's anonymous resident memory (`RssAnon` in `/proc/self/status`), in bytes.
private func anonymousBytes() -> Int {
    let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
    let line = status.split(separator: "\n").first { $0.hasPrefix("RssAnon:") } ?? ""
    return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) * 1024
}
