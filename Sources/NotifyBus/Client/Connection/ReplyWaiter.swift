import NIOCore
import NotifyProtocol

/// Who waits for the reply to a request: a promise of the connection's event loop, or the task of an acknowledged
/// publish that went through the outbox, resumed without a promise between.
enum ReplyWaiter {
    case promise(EventLoopPromise<ServerFrame>)
    /// An acknowledged publish's caller, and what is called on the event loop with its reply first.
    case continuation(CheckedContinuation<ServerFrame, any Error>, onReply: (@Sendable (ServerFrame) -> Void)?)

    func succeed(_ frame: ServerFrame) {
        switch self {
        case .promise(let promise): promise.succeed(frame)
        case .continuation(let continuation, let onReply):
            onReply?(frame)
            continuation.resume(returning: frame)
        }
    }

    func fail(_ error: any Error) {
        switch self {
        case .promise(let promise): promise.fail(error)
        case .continuation(let continuation, _): continuation.resume(throwing: error)
        }
    }
}
