public import NIOCore
import NotifyProtocol

/// Where the broker sends a connection's frames.
///
/// The daemon implements it on a NIO channel, tests with a buffer. The broker calls it only from the thread that
/// owns the broker.
public protocol SessionTransport: AnyObject {
    /// Queues `frame` for the connection, after everything queued before. The same buffer may be queued to many
    /// connections: it is encoded once.
    func write(_ frame: ByteBuffer)
    /// Sends what was queued. The broker calls it once per batch of work, not per frame.
    func flush()
    /// Closes the connection after what was queued has been sent.
    func close()
    /// Closes the connection now, dropping what was queued: for a subscriber too far behind to be owed anything.
    func abort()
    /// Whether the connection takes more frames now. While it does not, the broker queues them itself. Whenever it
    /// changes, either way, the transport's owner calls ``Broker/writabilityChanged(_:)`` (from within a
    /// ``write(_:)`` too): the broker keeps what it was last told and does not ask per request. It may turn false
    /// only in a ``write(_:)`` (or be reported turning true): within a batch the broker checks it once per run of
    /// deliveries to the connection, and writes a run only when it ends.
    var isWritable: Bool { get }
    /// Bytes written and not yet taken by the connection: the broker counts them in the queued bytes of the
    /// connection's uid, as it counts its queue. Read after each flush, so it may lag until then; when it falls
    /// without a flush (the peer read them), the transport calls ``Broker/writeBufferChanged(_:)``.
    var bufferedBytes: Int { get }
}
