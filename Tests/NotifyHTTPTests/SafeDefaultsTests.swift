import Foundation
import NIOCore
import Testing

@testable import NotifyBus
@testable import NotifyHTTP

/// The gateway's checks on where a request comes from and what a stream holds (issue 46; no socket).
@Suite("The HTTP gateway's origin, ranges and stream queue (no socket)", .timeLimit(.minutes(1)))
struct SafeDefaultsTests {
    static let local = try! SocketAddress(ipAddress: "127.0.0.1", port: 8080)

    @Test("Host must name the listener (its address and port, localhost on loopback) or an --allow-host name")
    func hosts() {
        let policy = SameOriginPolicy(hostNames: ["Notify.Example"])
        for taken in ["127.0.0.1:8080", "localhost:8080", "LOCALHOST:8080", "notify.example", "notify.example:443"] {
            #expect(policy.refusal(host: taken, origin: nil, local: Self.local) == nil, "\(taken)")
        }
        for refused in ["evil.example:8080", "127.0.0.1:8081", "127.0.0.1", "127.0.0.2:8080", "", "[::1]:8080", "127.0.0.1:8080:1", "localhost:x"] {
            #expect(policy.refusal(host: refused, origin: nil, local: Self.local) != nil, "\(refused)")
        }
        #expect(policy.refusal(host: nil, origin: nil, local: Self.local) == nil, "HTTP/1.0 without Host")
        let v6 = try! SocketAddress(ipAddress: "::1", port: 80)
        #expect(SameOriginPolicy().refusal(host: "[::1]", origin: nil, local: v6) == nil)
        #expect(SameOriginPolicy().refusal(host: "localhost", origin: nil, local: v6) == nil)
        let open = try! SocketAddress(ipAddress: "192.0.2.7", port: 8080)
        #expect(SameOriginPolicy().refusal(host: "localhost:8080", origin: nil, local: open) != nil, "localhost is loopback's only")
    }

    @Test("Origin must be the gateway's own or an --allow-origin one; null and other sites are refused")
    func origins() {
        let policy = SameOriginPolicy(hostNames: ["notify.example"], origins: ["https://dash.example"])
        // Not a page's (a browser sends only http(s) or null): a WebSocket library's `ws://host`.
        for taken in ["http://127.0.0.1:8080", "http://localhost:8080", "https://dash.example", "HTTPS://DASH.EXAMPLE", "https://notify.example", "ws://127.0.0.1"] {
            #expect(policy.refusal(host: "127.0.0.1:8080", origin: taken, local: Self.local) == nil, "\(taken)")
        }
        for refused in ["null", "http://evil.example", "http://127.0.0.1:8081", "https://127.0.0.1:8080", "http://127.0.0.1", "http://dash.example", "https://evil.example:8080"] {
            #expect(policy.refusal(host: "127.0.0.1:8080", origin: refused, local: Self.local) != nil, "\(refused)")
        }
        #expect(SameOriginPolicy.isOrigin("https://a.example:8443") && !SameOriginPolicy.isOrigin("a.example") && !SameOriginPolicy.isOrigin("https://a/b"))
    }

    @Test("clients are counted by range: all of loopback as one, IPv4 by address, IPv6 by /64, v4-mapped as IPv4")
    func ranges() throws {
        func key(_ address: String) throws -> String { ClientRange.key(of: try SocketAddress(ipAddress: address, port: 1)) }
        #expect(try key("127.0.0.1") == "loopback" && key("127.0.0.17") == "loopback" && key("::1") == "loopback")
        #expect(try key("::ffff:127.0.0.2") == "loopback" && key("::ffff:192.0.2.1") == "192.0.2.1")
        #expect(try key("192.0.2.1") != key("192.0.2.2"))
        #expect(try key("2001:db8:1:2::1") == key("2001:db8:1:2:ffff::9"))
        #expect(try key("2001:db8:1:2::1") != key("2001:db8:1:3::1"))
        #expect(ClientRange.key(of: nil) == "local")
    }

    @Test("the byte search that finds a connection's line in the kernel's TCP list: first place, whole match, edges")
    func byteSearch() {
        func index(_ needle: String, _ haystack: String) -> Int? {
            Array(needle.utf8).withUnsafeBytes { n in Array(haystack.utf8).withUnsafeBytes { LoopbackPeer.firstIndex(of: n, in: $0) } }
        }
        #expect(index("0100007F:1F90 0100007F:8001", "  0: 0100007F:1F91 0100007F:8001\n  1: 0100007F:1F90 0100007F:8001 01") == 38)
        #expect(index("abc", "ababc") == 2 && index("abc", "abc") == 0 && index("abc", "ab") == nil && index("abc", "") == nil)
        #expect(index("x", "yyyx") == 3 && index("xy", "yyyx") == nil)
    }

    @Test("a loopback connection's ends are written as the kernel's TCP lists write them, and the list names this process's own connection's owner")
    func loopbackPeer() throws {
        #expect(LoopbackPeer.key(try SocketAddress(ipAddress: "127.0.0.1", port: 8080)) == "0100007F:1F90")
        #expect(LoopbackPeer.key(try SocketAddress(ipAddress: "::1", port: 443)) == "00000000000000000000000001000000:01BB")
        // A real connection over loopback, both ends in this process: the kernel says they are this uid's.
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        var address = try SocketAddress(ipAddress: "127.0.0.1", port: 0)
        _ = address.withSockAddr { bind(listener, $0, socklen_t($1)) }
        listen(listener, 1)
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) } }
        address = try SocketAddress(ipAddress: "127.0.0.1", port: Int(UInt16(bigEndian: withUnsafeBytes(of: storage) { $0.load(fromByteOffset: 2, as: UInt16.self) })))
        let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(client) }
        #expect(address.withSockAddr { connect(client, $0, socklen_t($1)) } == 0)
        var clientStorage = sockaddr_storage()
        length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &clientStorage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(client, $0, &length) } }
        let clientPort = Int(UInt16(bigEndian: withUnsafeBytes(of: clientStorage) { $0.load(fromByteOffset: 2, as: UInt16.self) }))
        let remote = try SocketAddress(ipAddress: "127.0.0.1", port: clientPort)
        #expect(LoopbackPeer.uid(remote: remote, local: address) == getuid())
        // Both ways of asking: the kernel for the one socket, and its lists; they agree.
        #expect(LoopbackPeer.askKernel(remote: remote, local: address) == getuid(), "inet_diag's answer")
        #expect(LoopbackPeer.fromLists(remote: remote, local: address) == getuid(), "/proc/net/tcp's answer")
        // Not the client's socket (the ends swapped name the server's, which is this uid's too; a port nobody uses
        // names none).
        let nobody = try SocketAddress(ipAddress: "127.0.0.1", port: 1)
        #expect(LoopbackPeer.askKernel(remote: nobody, local: address) == nil)
        #expect(ClientRange.key(of: remote, local: address) == "uid \(getuid())")
    }

    static func message(_ topic: String, _ sequence: UInt64, bytes: Int = 100) -> GatewayEvent {
        .message(Delivery(
            topic: try! Topic(topic),
            sequence: sequence,
            time: PublishTime(microsecondsSinceEpoch: 1),
            publisher: Publisher(uid: 1, pid: 1),
            payload: ByteBuffer(repeating: UInt8(ascii: "x"), count: bytes)
        ))
    }

    @Test("a stream's queue holds at most its limit: the oldest go, counted in one dropped event that comes first")
    func queueDrops() async throws {
        let queue = StreamQueue(limit: 10 * StreamQueue.size(of: Self.message("a.b", 1)))
        for sequence in 1...25 { queue.push(Self.message("a.b", UInt64(sequence))) }
        #expect(queue.held.events == 10)
        let taken = try #require(await queue.take(upTo: 1 << 20))
        guard case .dropped(let notice, _) = taken.first else { Issue.record("no dropped event first: \(taken)"); return }
        #expect(notice.topic.name == "a.b" && notice.count == 15 && notice.firstSequence == 1 && notice.lastSequence == 15)
        let sequences = taken.dropFirst().compactMap { event -> UInt64? in
            if case .message(let delivery) = event { return delivery.sequence }
            return nil
        }
        #expect(sequences == Array(16...25))
        // Of two topics: one notice for both, their count only.
        for sequence in 1...11 { queue.push(Self.message(sequence % 2 == 0 ? "a.b" : "c.d", UInt64(sequence))) }
        queue.push(Self.message("c.d", 12))
        let second = try #require(await queue.take(upTo: 1 << 20))
        guard case .dropped(let both, _) = second.first else { Issue.record("no dropped event: \(second)"); return }
        #expect(both.isAboutManyTopics && both.count == 2)
        queue.finish()
        #expect(await queue.take(upTo: 1) == nil)
    }

    @Test("what waits is taken at once for a poll, a dropped event first; nothing waits after")
    func queueTakeAtHand() {
        let queue = StreamQueue(limit: 3 * StreamQueue.size(of: Self.message("a.b", 1)))
        for sequence in 1...5 { queue.push(Self.message("a.b", UInt64(sequence))) }
        let taken = queue.takeAtHand()
        guard case .dropped(let notice, _) = taken.first else { Issue.record("no dropped event first: \(taken)"); return }
        #expect(notice.count == 2 && taken.count == 4)
        #expect(queue.takeAtHand().isEmpty && queue.held.events == 0)
    }

    @Test("a keepalive joins the queue only when nothing else waits; one message larger than the limit is kept whole")
    func queueKeepaliveAndLarge() async throws {
        let queue = StreamQueue(limit: 1_000)
        queue.push(Self.message("a.b", 1, bytes: 5_000))
        queue.pushKeepalive(.keepalive(topics: "a.b", at: .now()))
        let taken = try #require(await queue.take(upTo: 1 << 20))
        #expect(taken.count == 1)
        queue.pushKeepalive(.keepalive(topics: "a.b", at: .now()))
        #expect(try #require(await queue.take(upTo: 1 << 20)).count == 1)
    }

    @Test("raw lines carry no control characters a terminal would obey: C0 but tab, DEL, C1 in UTF-8")
    func rawIsInert() {
        let payload = "red \u{1B}[31m bell \u{07} csi \u{9B}2J nel \u{85} del \u{7F} tab\tok é"
        var buffer = ByteBuffer()
        StreamFormat.raw.write(Self.messageWith(payload), into: &buffer)
        let bytes = Array(buffer.readableBytesView)
        #expect(!bytes.dropLast().contains { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7F })
        #expect(!zip(bytes, bytes.dropFirst()).contains { $0 == 0xC2 && (0x80...0x9F).contains($1) })
        #expect(String(decoding: bytes, as: UTF8.self).hasSuffix("tab\tok é\n"))
    }

    static func messageWith(_ text: String) -> GatewayEvent {
        .message(Delivery(topic: try! Topic("a.b"), sequence: 1, time: PublishTime(microsecondsSinceEpoch: 1), publisher: Publisher(uid: 1, pid: 1), payload: ByteBuffer(string: text)))
    }

    @Test("the page links a topic on this gateway whatever its name: /evil.example is /%2Fevil.example/…, not //evil.example/…")
    func pageLinksStayHere() throws {
        let topic = try Topic("/evil.example")
        let delivery = Delivery(topic: topic, sequence: 1, time: PublishTime(microsecondsSinceEpoch: 1), publisher: Publisher(uid: 1, pid: 1), payload: ByteBuffer(string: "x"))
        let html = PageRenderer.page(filter: ">", latest: [delivery], error: nil)
        #expect(html.contains(#"href="/%2Fevil.example/raw?since=all""#))
        #expect(!html.contains(#"href="//"#))
        // With the page's own ?auth=, its links carry it: a token is needed for them too.
        let withAuth = PageRenderer.page(filter: ">", latest: [delivery], error: nil, auth: "QmVhcmVy_dG9r-ZW4")
        #expect(withAuth.contains(#"href="/%2Fevil.example/raw?since=all&amp;auth=QmVhcmVy_dG9r-ZW4""#))
    }
}

/// Each client range's share of what the gateway's user may retain at the daemon (issue 46; no socket).
@Suite("The HTTP gateway's retained shares (no socket)", .timeLimit(.minutes(1)))
struct RetainedSharesTests {
    static func topic(_ name: String) -> Topic { try! Topic(name) }

    @Test("a range past its share of topics or bytes gets a 429, another range does not; replacing its own topic is no new topic; a topic retained by another moves to it")
    func shares() throws {
        let shares = RetainedShares(perClient: (topics: 2, bytes: 1_000), total: 8)
        _ = try shares.take(Self.topic("a.1"), bytes: 100, by: "a")
        _ = try shares.take(Self.topic("a.2"), bytes: 100, by: "a")
        #expect(throws: GatewayError.self) { try shares.take(Self.topic("a.3"), bytes: 1, by: "a") }
        _ = try shares.take(Self.topic("a.2"), bytes: 900, by: "a")
        #expect(shares.held(by: "a") == (2, 1_000))
        #expect(throws: GatewayError.self) { try shares.take(Self.topic("a.1"), bytes: 101, by: "a") }
        _ = try shares.take(Self.topic("b.1"), bytes: 500, by: "b")
        // b retains a's topic: it is b's now, and a has room again.
        _ = try shares.take(Self.topic("a.1"), bytes: 10, by: "b")
        #expect(shares.held(by: "a") == (1, 900) && shares.held(by: "b") == (2, 510))
        _ = try shares.take(Self.topic("a.3"), bytes: 50, by: "a")
    }

    @Test("a settled topic can be forgotten when the daemon no longer holds its message, and only that message; a failed publish undoes only its own entry")
    func forgetting() throws {
        let shares = RetainedShares(perClient: (topics: 1, bytes: 1_000), total: 8)
        _ = try shares.take(Self.topic("f.1"), bytes: 10, by: "a")
        #expect(shares.candidates(of: "a").isEmpty, "an entry is checked only once its number is known")
        shares.settle(Self.topic("f.1"), of: "a", sequence: 7)
        #expect(shares.candidates(of: "a").map(\.sequence) == [7])
        shares.forget("f.1", of: "a", sequence: 6)
        #expect(shares.held(by: "a") == (1, 10), "another message's number forgets nothing")
        shares.forget("f.1", of: "a", sequence: 7)
        #expect(shares.held(by: "a") == (0, 0))
        // b's publish fails after a settled c's entry: the undo leaves c's.
        let before = try shares.take(Self.topic("f.2"), bytes: 5, by: "b")
        _ = try shares.take(Self.topic("f.2"), bytes: 6, by: "c")
        shares.settle(Self.topic("f.2"), of: "c", sequence: 1)
        shares.restore(Self.topic("f.2"), before)
        #expect(shares.held(by: "c") == (1, 6) && shares.held(by: "b") == (0, 0))
    }

    @Test("a publish that failed puts back what the topic held; the ledger holds at most its total")
    func restoreAndTotal() throws {
        let shares = RetainedShares(perClient: (topics: 5, bytes: 1_000), total: 3)
        let before = try shares.take(Self.topic("t.1"), bytes: 10, by: "a")
        #expect(before == nil)
        let previous = try shares.take(Self.topic("t.1"), bytes: 20, by: "b")
        shares.restore(Self.topic("t.1"), previous)
        #expect(shares.held(by: "a") == (1, 10) && shares.held(by: "b") == (0, 0))
        _ = try shares.take(Self.topic("t.2"), bytes: 1, by: "b")
        _ = try shares.take(Self.topic("t.3"), bytes: 1, by: "c")
        #expect(throws: GatewayError.self) { try shares.take(Self.topic("t.4"), bytes: 1, by: "d") }
    }
}
