package import NIOCore

/// A connection that takes everything and keeps nothing: where an importer's replies go (its refusals reach the
/// fleet through ``Broker/publishImported(_:through:)``), and the benchmarks' subscribers.
package final class DiscardingTransport: SessionTransport {
    package init() {}
    package func write(_ frame: ByteBuffer) {}
    package func flush() {}
    package func close() {}
    package func abort() {}
    package var isWritable: Bool { true }
    package var bufferedBytes: Int { 0 }
}
