// swift-tools-version: 6.2
import PackageDescription

/// Settings every target of ours shares: Swift 6 strict concurrency is the language mode; these make the
/// remaining rough edges errors too, so `main` stays free of warnings.
let strictSettings: [SwiftSetting] = [
    .treatAllWarnings(as: .error),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "notifyd",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "NotifyBus", targets: ["NotifyBus"]),
        .library(name: "NotifyCenter", targets: ["NotifyCenter"]),
        .executable(name: "notifyd", targets: ["notifyd"]),
        .executable(name: "notify", targets: ["notify-cli"]),
        .executable(name: "notifyd-http", targets: ["notifyd-http"]),
        .executable(name: "notifyd-fleet", targets: ["notifyd-fleet"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.6.0"),
        // No traits: the file formats they add (JSON by default) bring all of Foundation; notifyd reads its own.
        .package(url: "https://github.com/apple/swift-configuration", from: "1.4.0", traits: []),
        // `notify bench` records its latencies in an HdrHistogram; Foundation-free, so `notify` stays lean.
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.2.0"),
        // The NATS bridge's TLS (issue 37), and the Ed25519 signatures of its NKey and JWT logins.
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        // `swift package generate-documentation`: the DocC of NotifyBus and NotifyCenter (script/docs, run by script/test).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        // notifyd-http (issue 39): the HTTP gateway, a client of the daemon; the daemon itself stays off the network.
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket", from: "2.8.1"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
    ],
    targets: [
        // What both sides of the socket share: topic names and patterns, the subscription index, the wire
        // protocol's requests and frames with their codecs, where the socket is and which release this is. No I/O
        // (SocketPath reads the environment and asks whether a path is a socket or a private directory, no more).
        .target(
            name: "NotifyProtocol",
            dependencies: [.product(name: "NIOCore", package: "swift-nio")],
            swiftSettings: strictSettings
        ),
        // The C library calls the client, the broker and the daemon make themselves (file descriptors, sockets and
        // their peers, the heap, the environment), written once for every C library, and the blocking reads of a
        // daemon's frames that the client and `notifyd --reload` share. Package-only: no public API.
        .target(
            name: "NotifySystem",
            dependencies: ["NotifyProtocol", .product(name: "NIOCore", package: "swift-nio")],
            swiftSettings: strictSettings
        ),
        // What the state log's mapped tail needs from C: a copy that returns an error where the file system would
        // raise SIGBUS, and `fallocate`.
        .target(name: "CLogTail"),
        // The daemon's core, without I/O: topics and their histories, sessions, fan-out, access rules, the state
        // log. For notifyd, the fuzzers, the benchmarks and the tests; a service that imports NotifyBus compiles
        // none of it (issue 38).
        .target(
            name: "NotifyBroker",
            dependencies: [
                "CLogTail",
                "NotifyProtocol",
                "NotifySystem",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "DequeModule", package: "swift-collections"),
            ],
            swiftSettings: strictSettings
        ),
        // The library services import: the client, the in-process Messenger, and (re-exported) the protocol's
        // names, so `import NotifyBus` is all a service writes.
        .target(
            name: "NotifyBus",
            dependencies: [
                "NotifyProtocol",
                "NotifySystem",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "DequeModule", package: "swift-collections"),
            ],
            swiftSettings: strictSettings
        ),
        // Typed notifications over NotifyBus's client (issue 19): apart, because it uses Foundation's JSON coders,
        // which the daemon and `notify` do without.
        .target(
            name: "NotifyCenter",
            dependencies: [
                "NotifySystem",
                "NotifyBus",
                "NotifyProtocol",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "DequeModule", package: "swift-collections"),
            ],
            swiftSettings: strictSettings
        ),
        // The engine of `notify bench` and the load benchmarks: not part of the library a client imports.
        .target(
            name: "NotifyBench",
            dependencies: [
                "NotifyBus",
                "NotifySystem",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
            ],
            swiftSettings: strictSettings
        ),
        // The part of the NATS client protocol the fleet service needs (issue 17), apart, so it can be tested
        // alone and replaced by a library one day.
        .target(
            name: "NATSClient",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strictSettings
        ),
        // The configuration file's format (`key = value`, `[section]`), which the daemon and the fleet service read.
        .target(
            name: "ConfigurationFiles",
            dependencies: [.product(name: "Configuration", package: "swift-configuration")],
            swiftSettings: strictSettings
        ),
        // The fleet (issue 47): other hosts through NATS, as a client of the daemon (protocol 5). Everything that
        // crosses the network is here, so the daemon links no NATS or TLS code and stays off the network.
        .target(
            name: "NotifyFleet",
            dependencies: [
                "NotifyProtocol",
                "NotifySystem",
                "NATSClient",
                "ConfigurationFiles",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "OrderedCollections", package: "swift-collections"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "notifyd-fleet",
            dependencies: [
                "NotifySystem",
                "NotifyFleet",
                "NotifyBus",
                "ConfigurationFiles",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            path: "Sources/notifyd-fleet",
            swiftSettings: strictSettings
        ),
        // The daemon (issue 50): the server on the broker's core, its settings, systemd and the journal. A library,
        // so the tests drive it without a process; `notifyd` is a thin shell over it. A peer of the client library,
        // not a user of it: both stand on NotifyProtocol.
        .target(
            name: "NotifyDaemon",
            dependencies: [
                "NotifyBroker",
                "NotifyProtocol",
                "NotifySystem",
                "ConfigurationFiles",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "notifyd",
            dependencies: ["NotifyDaemon"],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "notify-cli",
            dependencies: [
                "NotifySystem",
                "NotifyProtocol",
                .product(name: "NIOPosix", package: "swift-nio"),
                "NotifyBus",
                "NotifyBench",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "Sources/notify-cli",
            swiftSettings: strictSettings
        ),
        // The HTTP gateway's logic (issue 39): ntfy's requests and event shapes, `since=`, the streams; a client of
        // the daemon through NotifyBus, with no broker of its own. Testable without a socket where it can be.
        .target(
            name: "NotifyHTTP",
            dependencies: [
                "NotifyProtocol",
                .product(name: "NIOHTTP1", package: "swift-nio"),
                "NotifyBus",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "notifyd-http",
            dependencies: [
                "NotifyHTTP",
                "NotifyBus",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Sources/notifyd-http",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "BrokerBenchmarks",
            dependencies: [
                "NotifySystem",
                "NotifyBroker",
                "NotifyBus",
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "Benchmarks/BrokerBenchmarks",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "notifyd-load",
            dependencies: [
                // notifyd-http's WebSocket streams, measured with NIO's frame decoder (issue 49).
                .product(name: "NIOWebSocket", package: "swift-nio"),
                "NotifyBus",
                "NotifyCenter",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            path: "Benchmarks/NotifydLoad",
            swiftSettings: strictSettings
        ),
        // The fuzz targets (script/fuzz): what a client can send, and what another host can send through NATS.
        .target(name: "FuzzSupport", path: "Fuzz/Support", swiftSettings: strictSettings),
        .executableTarget(
            name: "notifyd-request-fuzz",
            dependencies: [
                "NotifyBroker",
                "NotifyBus",
                "FuzzSupport",
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "Fuzz/RequestFuzzer",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "notifyd-import-fuzz",
            dependencies: [
                "NotifyBroker",
                "NotifyBus",
                "NotifyFleet",
                "NATSClient",
                "FuzzSupport",
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "Fuzz/ImportFuzzer",
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "NotifyCenterTests",
            dependencies: [
                "NotifyCenter",
                "NotifyBus",
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
        // Tests by target, like the code: the protocol's codecs and topics; the broker (through a recording
        // transport, no socket); the client library and the Messenger.
        .testTarget(
            name: "NotifyProtocolTests",
            dependencies: [
                "NotifyProtocol",
                "NotifyBench",
                "TestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "NotifyBrokerTests",
            dependencies: [
                "CLogTail",
                "NotifyBroker",
                "NotifyProtocol",
                "NotifyBus",
                "TestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "NotifyBusTests",
            dependencies: [
                "NotifySystem",
                "NotifyBus",
                "NotifyProtocol",
                "TestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
        // What several test targets share: a seeded random generator, a reader of Prometheus's text format.
        .target(
            name: "TestSupport",
            path: "Tests/TestSupport",
            swiftSettings: strictSettings
        ),
        // Real nats-server processes for the tests that need one.
        .target(
            name: "NATSTestSupport",
            dependencies: [.product(name: "NIOConcurrencyHelpers", package: "swift-nio")],
            path: "Tests/NATSTestSupport",
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "NATSClientTests",
            dependencies: [
                "NATSClient",
                "NATSTestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "NotifyHTTPTests",
            dependencies: [
                "NotifyHTTP",
                "NotifyBus",
                "TestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "NotifyCLITests",
            dependencies: [
                "notify-cli",
                "NotifyBus",
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "NotifydTests",
            dependencies: [
                "NotifyBroker",
                "NotifyDaemon",
                "NotifySystem",
                "NotifyBus",
                "ConfigurationFiles",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
        // The fleet service's logic without a daemon: its settings, what crosses, the outbox, the link's frames.
        .testTarget(
            name: "NotifyFleetTests",
            dependencies: [
                "NotifyFleet",
                "NotifyProtocol",
                "NATSClient",
                "NATSTestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "IntegrationTests",
            dependencies: [
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                "NotifyProtocol",
                // A WebSocket client for notifyd-http's /ws (issue 39).
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                "NotifyBus",
                "NotifyCenter",
                "NATSClient",
                "NATSTestSupport",
                "TestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
