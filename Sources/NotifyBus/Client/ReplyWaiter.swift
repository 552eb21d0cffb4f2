import NIOCore
import NotifyProtocol

/// Who waits for the reply to a request: a promise of the connection's event loop, or the task of an acknowledged
/// publish that went through the outbox, resumed without a promise between.
enum ReplyWaiter {
    case promise(EventLoopPromise<ServerFrame>)
    case continuation(CheckedContinuation<ServerFrame, any Error>)

    func succeed(_ frame: ServerFrame) {
        switch self {
        case .promise(let promise): promise.succeed(frame)
        case .continuation(let continuation): continuation.resume(returning: frame)
        }
    }

    func fail(_ error: any Error) {
        switch self {
        case .promise(let promise): promise.fail(error)
        case .continuation(let continuation): continuation.resume(throwing: error)
        }
    }
}
